"""Load a dataset's pickle (CIFAR's batch files) without running anything it might contain.

``pickle.load`` calls whatever a file names, so a crafted "dataset" can run code. This loader
admits only what real dataset pickles hold: dicts, lists, tuples, strings, bytes, numbers and
NumPy arrays of plain numeric dtypes. NumPy's own pickling calls are taken as placeholders,
checked, and the arrays built from their raw bytes: fuzzing found a dtype state that crashes
NumPy inside ``ndarray.__setstate__``. Any other global, or a persistent id, raises
:class:`UnsafePickleError` naming the file, before anything is called.
The opcodes are walked first without building anything, so that a memo index or a declared
length out of proportion with the file (CPython's unpickler sizes its memo to the largest
index: 8 bytes could make it allocate 128 MiB) is refused before any allocation.
"""

from __future__ import annotations

import io
import math
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


def _empty_bytes(*args: Any) -> bytes:
    """Protocol 2's ``bytes()`` for an empty bytes object (an empty array's data): only that."""
    if args:
        raise UnsafePickleError(f"refusing bytes{args!r}")
    return b""


class _Pending:
    """What NumPy's pickling calls would build, held as plain data until it is checked: no
    NumPy code runs on the file's state (a crafted dtype state can crash NumPy itself)."""

    def __init__(self, *args: Any) -> None:
        self.args = args
        self.state: Any = None

    def __setstate__(self, state: Any) -> None:
        self.state = state


class _PendingDtype(_Pending):
    """``numpy.dtype(spec, align, copy)`` and its state."""


class _PendingArray(_Pending):
    """``_reconstruct(ndarray, (0,), typecode)`` and its state (version, shape, dtype,
    Fortran order, raw bytes)."""


# (module, name) -> the object: NumPy's array pickling, under its NumPy 1 and NumPy 2 names
# (as placeholders, see _Pending), and the bytes constructor of Python 3's protocol-2 pickles.
_ALLOWED = {
    ("_codecs", "encode"): _latin1_bytes,
    ("__builtin__", "bytes"): _empty_bytes,
    ("builtins", "bytes"): _empty_bytes,
    ("numpy.core.multiarray", "_reconstruct"): _PendingArray,
    ("numpy._core.multiarray", "_reconstruct"): _PendingArray,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): _PendingDtype,
}


def _materialize(value: Any) -> Any:
    """The loaded object with its placeholders checked and turned into NumPy objects."""
    if isinstance(value, _PendingArray):
        return _array(value)
    if isinstance(value, _PendingDtype):
        return _dtype(value)
    if type(value) is dict:
        return {key: _materialize(item) for key, item in value.items()}
    if type(value) is list:
        return [_materialize(item) for item in value]
    if type(value) is tuple:
        return tuple(_materialize(item) for item in value)
    return value


def _dtype(pending: _PendingDtype) -> np.dtype:
    """A plain numeric dtype whose pickled state is the one NumPy itself would write."""
    spec = pending.args[0] if pending.args else None
    if not isinstance(spec, str):
        raise UnsafePickleError(f"refusing numpy.dtype({spec!r})")
    dtype = np.dtype(spec)
    state = pending.state
    if isinstance(state, tuple) and len(state) > 1 and state[1] in ("<", ">"):
        dtype = dtype.newbyteorder(state[1])
    if dtype.kind not in "biuf" or dtype.fields is not None or state != dtype.__reduce__()[2]:
        raise UnsafePickleError(f"refusing numpy dtype {spec!r} with state {state!r}")
    return dtype


def _array(pending: _PendingArray) -> np.ndarray:
    """The array NumPy's pickle describes, built from its raw bytes after every check."""
    subtype, shape = (*pending.args, None, None)[:2]
    state = pending.state
    if subtype is not np.ndarray or shape != (0,) or not isinstance(state, tuple):
        raise UnsafePickleError(f"refusing numpy _reconstruct{pending.args!r}")
    if len(state) != 5 or not isinstance(state[2], _PendingDtype):
        raise UnsafePickleError("refusing an ndarray state that NumPy's pickles do not write")
    _, shape, pending_dtype, fortran, raw = state
    dtype = _dtype(pending_dtype)
    if not (isinstance(shape, tuple) and all(type(d) is int and d >= 0 for d in shape)):
        raise UnsafePickleError(f"refusing ndarray shape {shape!r}")
    if isinstance(raw, str):  # a Python 2 pickle's str, decoded as latin1
        raw = raw.encode("latin1")
    expected = math.prod(shape) * dtype.itemsize
    if not isinstance(raw, bytes) or len(raw) != expected:
        size = len(raw) if isinstance(raw, bytes) else type(raw).__name__
        raise UnsafePickleError(
            f"refusing ndarray data: shape {shape} of {dtype} needs {expected} bytes, got {size}"
        )
    return np.frombuffer(raw, dtype).reshape(shape, order="F" if fortran else "C")


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
    operations: Any = pickletools.genops(data)
    for count, (opcode, argument, _) in enumerate(operations, start=1):
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
        return _materialize(_DatasetUnpickler(io.BytesIO(data), path).load())
    except UnsafePickleError as error:
        if str(error).startswith(path):
            raise
        raise UnsafePickleError(f"{path}: {error}") from None
    except Exception as error:  # only admitted callables run: anything else is bad data
        raise pickle.UnpicklingError(
            f"{path}: not a readable dataset pickle (truncated or corrupt): {error}"
        ) from error
