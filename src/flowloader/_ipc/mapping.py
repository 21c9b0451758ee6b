"""Shared mappings that keep no file descriptor open.

Python's ``mmap.mmap`` keeps a duplicate of the descriptor it maps for as long as the mapping
lives (until Python 3.13's ``trackfd=False``), so every batch a user held kept one descriptor
open and ~1,000 held batches hit the usual ``ulimit -n 1024``. Here the pages are mapped with
libc's ``mmap`` through ctypes and the descriptor is closed by the caller right away; the pages
are unmapped when the last NumPy array viewing them is gone. Where libc cannot be reached the
standard ``mmap`` is used (with ``trackfd=False`` where Python has it).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import mmap
import os
import sys
from typing import Any

_PROT_READ_WRITE = mmap.PROT_READ | mmap.PROT_WRITE
_MAP_FAILED = ctypes.c_void_p(-1).value


def _load_libc() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [
            ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
            ctypes.c_long,
        ]  # fmt: skip
        libc.munmap.restype = ctypes.c_int
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    except (OSError, AttributeError):  # pragma: no cover - no libc with mmap (Windows)
        return None
    return libc


_libc = _load_libc() if sys.platform != "win32" else None


class _Unmap:
    """Owned by the buffer object: unmaps the pages when the buffer (and so every array
    viewing it) is gone."""

    __slots__ = ("address", "length")

    def __init__(self, address: int, length: int) -> None:
        self.address, self.length = address, length

    def __del__(self) -> None:
        if _libc is not None:
            _libc.munmap(self.address, self.length)


def map_shared(fd: int, length: int) -> Any:
    """Map ``length`` bytes of ``fd`` shared and writable; returns a writable buffer object.

    The mapping does not keep ``fd``: the caller closes it. Raises OSError (with errno, e.g.
    ENOMEM when the process is out of mappings) if the mapping cannot be made.
    """
    if _libc is None:  # pragma: no cover - exercised only where libc is missing
        if sys.version_info >= (3, 13):
            return mmap.mmap(fd, length, trackfd=False)
        return mmap.mmap(fd, length)
    address = _libc.mmap(None, length, _PROT_READ_WRITE, mmap.MAP_SHARED, fd, 0)
    if address in (None, _MAP_FAILED):
        code = ctypes.get_errno() or errno.ENOMEM
        raise OSError(code, os.strerror(code))
    buffer = (ctypes.c_uint8 * length).from_address(address)
    buffer.unmap = _Unmap(address, length)  # type: ignore[attr-defined]  # lives as long as it
    return buffer
