"""Load a dataset's pickle (CIFAR's batch files) without running anything it might contain.

``pickle.load`` calls whatever a file names, so a crafted "dataset" can run code. This loader
admits only what real dataset pickles hold: dicts, lists, tuples, strings, bytes, numbers and
NumPy arrays (built through ``numpy``'s own array reconstructor). Any other global, or a
persistent id, raises :class:`UnsafePickleError` naming the file, before anything is called.
The opcodes are walked first without building anything, so that a memo index or a declared
length out of proportion with the file (CPython's unpickler sizes its memo to the largest
index: 8 bytes could make it allocate 128 MiB) is refused before any allocation.
"""

from __future__ import annotations

import io
import pickle
import pickletools
import warnings
from typing import Any

import numpy as np


class UnsafePickleError(pickle.UnpicklingError):
    """The file asks to build something a dataset pickle has no reason to contain."""


def _latin1_bytes(text: str, encoding: str = "latin1") -> bytes:
    """What protocol 2 pickles name as ``_codecs.encode`` to rebuild ``bytes``: only that."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise UnsafePickleError(f"refusing _codecs.encode({type(text).__name__}, {encoding!r})")
    return text.encode("latin1")


_numpy_reconstruct = np.ndarray.__reduce__(np.empty(0))[0]


def _empty_array(subtype: Any, shape: Any, dtype: Any) -> np.ndarray:
    """NumPy's array reconstructor as NumPy's own pickles call it: an empty ndarray, whose
    contents come with the next opcode (checked against their length by NumPy). Any other
    call would allocate what the file asks for."""
    if subtype is not np.ndarray or tuple(shape) != (0,):
        raise UnsafePickleError(f"refusing numpy _reconstruct({subtype!r}, {shape!r}, ...)")
    return _numpy_reconstruct(subtype, shape, dtype)


# (module, name) -> the object: NumPy's array pickling, under its NumPy 1 and NumPy 2 names,
# and the bytes constructor of Python 3's protocol-2 pickles.
_ALLOWED = {
    ("_codecs", "encode"): _latin1_bytes,
    ("numpy.core.multiarray", "_reconstruct"): _empty_array,
    ("numpy._core.multiarray", "_reconstruct"): _empty_array,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
}


class _DatasetUnpickler(pickle.Unpickler):
    def __init__(self, stream: Any, path: str) -> None:
        super().__init__(stream, encoding="latin1")  # Python 2 pickles, as torchvision reads
        self._path = path

    def find_class(self, module: str, name: str) -> Any:
        allowed = _ALLOWED.get((module, name))
        if allowed is None:
            raise UnsafePickleError(
                f"{self._path}: refusing to load {module}.{name}: a dataset pickle holds only "
                "dicts, lists, strings, numbers and NumPy arrays. The file is not what it "
                "claims to be (corrupt or crafted); nothing in it was run."
            )
        return allowed

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError(f"{self._path}: refusing a persistent id; not a dataset pickle")


_MEMO_PUTS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})


def _check_opcodes(data: bytes, path: str) -> None:
    """Walk the opcodes (pickletools builds nothing): lengths must fit in the file (genops
    refuses them otherwise) and memo indices stay below the number of opcodes seen."""
    with warnings.catch_warnings():  # pickletools warns on odd escapes in protocol-0 text
        warnings.simplefilter("ignore", DeprecationWarning)
        _walk_opcodes(data, path)


def _walk_opcodes(data: bytes, path: str) -> None:
    for count, (opcode, argument, _) in enumerate(pickletools.genops(data), start=1):
        if opcode.name == "FRAME" and argument > len(data):
            raise UnsafePickleError(f"{path}: a frame of {argument} bytes in a smaller file")
        if opcode.name in _MEMO_PUTS and int(argument) > count:
            raise UnsafePickleError(
                f"{path}: refusing memo index {argument} at opcode {count}: no dataset pickle "
                "has one; the file is corrupt or crafted"
            )


def load(path: str) -> Any:
    """The object pickled in ``path``, built from admitted types only.

    Raises UnsafePickleError for anything else, and pickle.UnpicklingError naming the file
    for a truncated or corrupt one.
    """
    with open(path, "rb") as stream:
        data = stream.read()
    try:
        _check_opcodes(data, path)
        return _DatasetUnpickler(io.BytesIO(data), path).load()
    except UnsafePickleError as error:
        if str(error).startswith(path):
            raise
        raise UnsafePickleError(f"{path}: {error}") from None
    except Exception as error:  # only admitted callables run: anything else is bad data
        raise pickle.UnpicklingError(
            f"{path}: not a readable dataset pickle (truncated or corrupt): {error}"
        ) from error
