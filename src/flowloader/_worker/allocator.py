"""Keep a worker's large temporary arrays in the malloc heap instead of fresh mappings, on
pages of ordinary size.

glibc serves allocations above a threshold (128 KiB at first, adapting later) with a new
mmap and returns them with munmap, so every decoded image, resized copy and float array
faults its pages in (and zeroes them) again: about 340 page faults per ImageNet-style sample
here, a third of its time. A fixed high threshold and no trimming let the heap reuse that
memory. NumPy's advice to back arrays of 4 MiB or more with huge pages is turned off: a new
worker's heap grows with its first batches, and zeroing fresh huge pages can stall on a
virtual machine (``_pages.py``); a ``Mixture`` whose workers started after a batch loaded in
process (``num_workers="auto"``'s probe) ran 6 of 12 epochs at 0.6x with the advice, none
without, and ImageNet training as fast either way (31.6 against 31.7 batches/s, 16 epochs
each). Applied in worker processes only; the user's own process keeps its settings.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

from .._pages import MMAP_THRESHOLD_MAX

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = MMAP_THRESHOLD_MAX  # the highest glibc takes
TRIM_THRESHOLD_BYTES = 256 << 20


def keep_large_allocations() -> bool:
    """Raise glibc's mmap and trim thresholds and turn NumPy's huge-page advice off; False
    where the thresholds cannot be set."""
    if not sys.platform.startswith("linux"):
        return False
    _ordinary_pages_for_numpy()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl has no mallopt)
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )


def _ordinary_pages_for_numpy() -> None:
    """Turn off NumPy's huge-page advice in this process, where NumPy has the switch."""
    try:
        from numpy._core import multiarray
    except ImportError:  # NumPy 1.x
        from numpy.core import multiarray  # type: ignore[no-redef]
    switch = getattr(multiarray, "_set_madvise_hugepage", None)
    if switch is not None:
        switch(False)
