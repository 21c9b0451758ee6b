"""Load a dataset's pickle (CIFAR's batch files) without running anything it might contain.

``pickle.load`` calls whatever a file names, so a crafted "dataset" can run code. This loader
admits only what real dataset pickles hold: dicts, lists, tuples, strings, bytes, numbers and
NumPy arrays (built through ``numpy``'s own array reconstructor). Any other global, or a
persistent id, raises :class:`UnsafePickleError` naming the file, before anything is called.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np


class UnsafePickleError(pickle.UnpicklingError):
    """The file asks to build something a dataset pickle has no reason to contain."""


def _latin1_bytes(text: str, encoding: str = "latin1") -> bytes:
    """What protocol 2 pickles name as ``_codecs.encode`` to rebuild ``bytes``: only that."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise UnsafePickleError(f"refusing _codecs.encode({type(text).__name__}, {encoding!r})")
    return text.encode("latin1")


# (module, name) -> the object: NumPy's array pickling, under its NumPy 1 and NumPy 2 names,
# and the bytes constructor of Python 3's protocol-2 pickles.
_ALLOWED = {
    ("_codecs", "encode"): _latin1_bytes,
    ("numpy.core.multiarray", "_reconstruct"): np.ndarray.__reduce__(np.empty(0))[0],
    ("numpy._core.multiarray", "_reconstruct"): np.ndarray.__reduce__(np.empty(0))[0],
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


def load(path: str) -> Any:
    """The object pickled in ``path``, built from admitted types only.

    Raises UnsafePickleError for anything else, and pickle.UnpicklingError naming the file
    for a truncated or corrupt one.
    """
    with open(path, "rb") as stream:
        try:
            return _DatasetUnpickler(stream, path).load()
        except UnsafePickleError:
            raise
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError) as error:
            raise pickle.UnpicklingError(
                f"{path}: not a readable dataset pickle (truncated or corrupt): {error}"
            ) from error
