"""A worker's pool of reusable shared-memory segments, and the bump allocator over one of them.

A batch lives in one segment from the moment the worker collates it until the consumer in the
main process drops it; then a Release message returns the segment to the pool. In steady state
no segment is created, so no fresh memory is faulted in per batch.

A pool keeps what the pipeline needs, not its high-water mark: free segments up to the most
that were in use at once over the last ``RECENT_TAKES`` batches (its ``Demand``). A loop that
once keeps a whole epoch's batches (a validation epoch's outputs, a replay buffer) makes a
worker hold that many segments while it keeps them; once they come back and the worker has
loaded ``RECENT_TAKES`` batches one at a time, it gives back all but those the pipeline has
used lately (prefetch_factor in flight and the one the loop holds, a segment more while one
is being filled). The thread workers' block pool (_worker/buffers.py) keeps the same rule.

Between epochs of persistent workers the main process trims further (``retire``): each
worker keeps ``prefetch_factor`` segments, one keeps one more, the loop's batches included,
so that the pools hold at most ``prefetch_factor x workers + 1`` segments after an epoch.
"""

from __future__ import annotations

import collections
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
# How many batches back a pool remembers how many segments (blocks) were in use at once.
RECENT_TAKES = 16


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


class Demand:
    """How many segments (or blocks) were in use at once lately: the most over the last
    ``span`` takes. A pool keeps free ones up to that and gives back the rest. ``restart()``
    (new workers) forgets the takes before it once ``span // 2`` new ones are seen."""

    def __init__(self, span: int = RECENT_TAKES) -> None:
        self._recent: collections.deque[int] = collections.deque(maxlen=span)
        self._stale = 0  # the oldest takes kept, from before restart()
        self._since_restart = 0

    def took(self, in_use: int) -> None:
        """One taken: ``in_use`` are in use now, that one included."""
        recent = self._recent
        if len(recent) == recent.maxlen and self._stale:
            self._stale -= 1  # the oldest goes to make room
        recent.append(in_use)
        self._since_restart += 1
        if self._stale and self._since_restart >= (recent.maxlen or 0) // 2:
            for _ in range(self._stale):
                recent.popleft()
            self._stale = 0

    def restart(self) -> None:
        """New workers: what the old ones used at once goes once they have shown their own."""
        self._stale, self._since_restart = len(self._recent), 0

    def spare(self, in_use: int) -> int:
        """How many free ones are worth keeping beside ``in_use``."""
        return max(max(self._recent, default=0) - in_use, 0)


class SegmentPool:
    """Segments owned by one worker: free ones to reuse, busy ones holding delivered batches."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._sequence = 0
        self._free: list[Segment] = []
        self._busy: dict[str, Segment] = {}
        self._retired: list[str] = []
        self._retiring: set[str] = set()  # busy ones to retire once released
        self.demand = Demand()

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
        self.demand.took(len(self._busy))
        return segment

    def arena(self, hint: int) -> Arena | None:
        """An arena for the next batch when one of ``hint`` bytes has been seen before."""
        return Arena(self.take(hint)) if hint > 0 else None

    def give_back(self, segment: Segment) -> None:
        """Return a segment that was taken but not sent."""
        if self._busy.pop(segment.name, None) is not None:
            self._free.append(segment)
            self._trim()

    def release(self, names: tuple[str, ...]) -> None:
        """The main process is done with these segments (the consumer dropped their batches):
        free again, those beyond what the pipeline has needed lately retired."""
        for name in names:
            segment = self._busy.pop(name, None)
            if segment is not None:
                self._free.append(segment)
                if name in self._retiring:
                    self._retiring.discard(name)
                    self._retire(segment)
        self._trim()

    def retire(self, names: tuple[str, ...]) -> None:
        """The main process has unmapped these segments (between epochs, beyond what the
        pipeline needs): retired now where free, else once released."""
        free = {segment.name: segment for segment in self._free}
        for name in names:
            if name in free:
                self._retire(free[name])
            elif name in self._busy:
                self._retiring.add(name)

    def _trim(self) -> None:
        """Retire free segments beyond the Demand's spare count, the smallest first."""
        extra = len(self._free) - self.demand.spare(len(self._busy))
        if extra > 0:
            for segment in sorted(self._free, key=lambda s: s.capacity)[:extra]:
                self._retire(segment)

    def pop_retired(self) -> tuple[str, ...]:
        """The segments retired since the last call (the main process unmaps them)."""
        retired, self._retired = tuple(self._retired), []
        return retired

    @property
    def segment_count(self) -> int:
        """Segments held, free or busy."""
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
