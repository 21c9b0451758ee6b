"""Reused batch memory for thread workers: batches collated in place in ordinary memory.

A thread worker hands its batch over as it is, so the batch's memory cannot be reused until
the consumer drops the batch. Each batch is built in one block (bump-allocated by an Arena, as
a process worker builds its batch in one shared-memory segment); when the last array viewing
the block is gone, the block goes back to its worker's free list. In steady state no batch
memory is allocated or faulted in: an ImageNet batch of 64 float images is 38 MB, which
``numpy.empty`` would map afresh (and the kernel zero) every time.
"""

from __future__ import annotations

import collections
import weakref

import numpy as np

from .._ipc.segment_pool import Arena, capacity_for


class _Block:
    """Memory for one batch at a time."""

    __slots__ = ("capacity", "memory")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.memory = bytearray(capacity)


class _Lease:
    """One batch's use of a block, with the Segment interface an Arena needs. Its array is
    a fresh view of the block, and every array the arena hands out views it, so it lives
    exactly as long as the batch does."""

    __slots__ = ("__weakref__", "address", "array", "capacity", "name")

    def __init__(self, block: _Block) -> None:
        self.array = np.frombuffer(block.memory, dtype=np.uint8)
        self.address = self.array.ctypes.data if block.capacity else 0
        self.capacity = block.capacity
        self.name = None


class BatchBuffers:
    """A thread worker's blocks: one arena per batch, blocks reused once their batch is gone."""

    def __init__(self) -> None:
        self._free: collections.deque[_Block] = collections.deque()
        self._size = 0  # the largest batch so far

    def arena(self) -> Arena:
        """An arena for the next batch (over no memory before the first batch has said how
        much a batch needs: its arrays are then ordinary ones)."""
        block = self._take(capacity_for(self._size) if self._size else 0)
        lease = _Lease(block)
        if block.capacity:
            weakref.finalize(lease.array, self._free.append, block)
        return Arena(lease)

    def note(self, arena: Arena) -> None:
        """What the batch built in ``arena`` asked for: the next blocks are made to fit it."""
        self._size = max(self._size, arena.wanted)

    def _take(self, capacity: int) -> _Block:
        if not capacity:
            return _Block(0)
        while True:  # a free block that fits; smaller ones (from smaller batches) are dropped
            try:
                block = self._free.popleft()
            except IndexError:
                return _Block(capacity)
            if block.capacity >= capacity:
                return block
