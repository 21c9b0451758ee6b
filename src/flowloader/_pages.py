"""Large uninitialised arrays on pages of ordinary size.

NumPy advises the kernel to back every array of 4 MiB or more with 2 MiB pages. Where the
kernel zeroes such a page on first touch, a virtual machine whose balloon hands freed memory
back to its host may have to fetch it from the host first. On this machine, ImageNet loaders
on 2 threads (fixed, or chosen by ``num_workers="auto"``) then spent 0.4-1.2 s of system time
in 24 of 48 epochs, against 0.15 s; with their batches allocated here, in none of 24
(interleaved runs of 12 epochs each), and as fast otherwise (31.3 batches/s either way).
Their batches (38.5 MB) are built here: in this process, and by each thread worker before
its reused blocks exist (once an epoch). Arrays at least ``OWN_MAPPING_BYTES`` get a private
anonymous mapping of their own, as glibc's malloc gives them anyway from its largest mmap
threshold on, without the advice; smaller ones are ``numpy.empty``'s, whose memory malloc
reuses.
"""

from __future__ import annotations

import math
import mmap
from typing import Any

import numpy as np

# glibc's largest mmap threshold (64-bit): from this size on, malloc maps every allocation
# afresh whatever its settings. Worker processes fix their threshold here (allocator.py).
MMAP_THRESHOLD_MAX = 32 << 20
OWN_MAPPING_BYTES = MMAP_THRESHOLD_MAX


def empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised array, as ``numpy.empty``; one of ``OWN_MAPPING_BYTES`` or more lies
    in pages of ordinary size (zero pages until written). On every in-process batch's path:
    the size is reckoned in plain integers (``numpy.prod`` cost 3 us a call)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < OWN_MAPPING_BYTES or dtype.hasobject or not hasattr(mmap, "MAP_PRIVATE"):
        return np.empty(shape, dtype)
    pages = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE)
    return np.frombuffer(pages, dtype=dtype).reshape(shape)
