"""A worker's pool of reusable shared-memory segments, and the bump allocator over one of them.

A batch lives in one segment from the moment the worker collates it until the consumer in the
main process drops it; then a Release message returns the segment to the pool. In steady state
no segment is created, so no fresh memory is faulted in per batch.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import _pages
from .shm import Segment, aligned
from .shm import unlink as unlink_segment

# Small batches get small segments: a consumer that holds 10,000 of them holds 10,000
# segments (no descriptor each, but pages and mappings).
MIN_SEGMENT_BYTES = 1 << 16
_GRANULE = 1 << 16


def capacity_for(nbytes: int) -> int:
    """Room for ``nbytes`` plus 1/8 slack (batches vary a little), in 64 KiB granules."""
    wanted = max(nbytes + nbytes // 8, MIN_SEGMENT_BYTES)
    return (wanted + _GRANULE - 1) // _GRANULE * _GRANULE


class Arena:
    """Bump allocation of arrays inside one segment, 64-byte aligned. It keeps a ledger of
    what it handed out, so the batch's encoder finds each array that is already in place."""

    def __init__(self, segment: Any, small_bytes: int = -1) -> None:
        self.segment = segment  # a Segment, or anything with its array, address and capacity
        # arrays up to this size are not placed here (None: np.empty makes them): a block
        # handed over as it is, whose labels a loop keeps, would stay held with them
        self.small_bytes = small_bytes
        self.used = 0
        self.wanted = 0  # bytes asked for, what did not fit included: the next batch's size
        self._handed_out: dict[int, tuple[int, int]] = {}  # address -> (offset, nbytes)

    def allocate(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray | None:
        """An uninitialised array in the segment, or None when it does not fit."""
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes <= self.small_bytes:
            return None
        self.wanted = aligned(self.wanted) + nbytes
        start = aligned(self.used)
        if start + nbytes > self.segment.capacity:
            return None
        self.used = start + nbytes
        self._handed_out[self.segment.address + start] = (start, nbytes)
        return self.segment.array[start : start + nbytes].view(dtype).reshape(shape)

    def allocate_or_empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """The batch contract's ``allocate``: in the segment, or ordinary memory once it is
        full (the encoder then moves the batch to a segment that fits)."""
        out = self.allocate(shape, dtype)
        return _pages.empty(shape, dtype) if out is None else out

    def offset_of(self, array: np.ndarray) -> int | None:
        """Where ``array`` lies in the segment, if it is an array this arena handed out (or a
        view of one covering it exactly, as a tensor made from it is); else None."""
        placed = self._handed_out.get(array.ctypes.data)
        if placed is None or placed[1] != array.nbytes or not array.flags.c_contiguous:
            return None
        return placed[0]


class SegmentPool:
    """Segments owned by one worker: free ones to reuse, busy ones holding delivered batches."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._sequence = 0
        self._free: list[Segment] = []
        self._busy: dict[str, Segment] = {}
        self._retired: list[str] = []

    def take(self, nbytes: int) -> Segment:
        """A segment of at least ``nbytes``: the smallest free one that fits, else a new one.

        When no free segment fits, the smallest free one is retired so that segments too small
        for the batches do not pile up.
        """
        fitting = [s for s in self._free if s.capacity >= nbytes]
        if fitting:
            segment = min(fitting, key=lambda s: s.capacity)
            self._free.remove(segment)
        else:
            if self._free:
                self._retire(min(self._free, key=lambda s: s.capacity))
            segment = self._create(capacity_for(nbytes))
        self._busy[segment.name] = segment
        return segment

    def arena(self, hint: int) -> Arena | None:
        """An arena for the next batch when one of ``hint`` bytes has been seen before."""
        return Arena(self.take(hint)) if hint > 0 else None

    def give_back(self, segment: Segment) -> None:
        """Return a segment that was taken but not sent."""
        if self._busy.pop(segment.name, None) is not None:
            self._free.append(segment)

    def release(self, names: tuple[str, ...]) -> None:
        for name in names:
            segment = self._busy.pop(name, None)
            if segment is not None:
                self._free.append(segment)

    def pop_retired(self) -> tuple[str, ...]:
        retired, self._retired = tuple(self._retired), []
        return retired

    @property
    def segment_count(self) -> int:
        return len(self._free) + len(self._busy)

    def close(self, *, main_gone: bool = False) -> None:
        """Unmap every segment, and unlink the free ones' files. A busy segment holds a batch
        that is in flight or delivered: the main process unlinks its file once it has mapped
        it, so its file stays, unless the main process is gone and nobody will map it.
        (See docs/design/multiprocess.md, "Who unlinks a segment".)"""
        busy = list(self._busy.values())
        for segment in [*self._free, *(busy if main_gone else [])]:
            segment.unlink()
        for segment in [*self._free, *busy]:
            segment.close()
        self._free.clear()
        self._busy.clear()

    def _create(self, capacity: int) -> Segment:
        name = f"{self._prefix}{self._sequence}"
        self._sequence += 1
        return Segment.create(name, capacity)

    def _retire(self, segment: Segment) -> None:
        self._free.remove(segment)
        unlink_segment(segment.name)
        segment.close()
        self._retired.append(segment.name)
