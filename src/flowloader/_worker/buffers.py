"""Reused batch memory for thread workers: batches collated in place in ordinary memory.

A thread worker hands its batch over as it is, so the batch's memory cannot be reused until
the consumer drops the batch. Each batch is built in one block (bump-allocated by an Arena, as
a process worker builds its batch in one shared-memory segment); when the last array viewing
the block is gone, the block goes back to its worker's free list. In steady state no batch
memory is allocated or faulted in: an ImageNet batch of 64 float images is 38 MB, which
``numpy.empty`` would map afresh (and the kernel zero) every time.

Only batches that large gain. Below glibc's largest mmap threshold (32 MiB) malloc keeps freed
memory in its heap and hands it out again by itself, and the blocks' bookkeeping only costs:
MNIST batches (200 KB) ran 20% slower through them. So the first batch is measured, and the
blocks are used only when batches are at least that large.
"""

from __future__ import annotations

import collections
import weakref

import numpy as np

from .._ipc.segment_pool import Arena, capacity_for
from .allocator import MMAP_THRESHOLD_BYTES


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
    """A thread worker's blocks: one arena per batch, blocks reused once their batch is gone.
    ``min_bytes``: the smallest batch worth a block."""

    def __init__(self, min_bytes: int = MMAP_THRESHOLD_BYTES) -> None:
        self._free: collections.deque[_Block] = collections.deque()
        self._min_bytes = min_bytes
        self._size = 0  # the largest batch so far
        self._measured = False

    def arena(self) -> Arena | None:
        """An arena for the next batch; None when batches are too small to gain (ordinary
        memory). The first batch's arena has no memory: its arrays are ordinary ones, and it
        measures how much a batch needs."""
        if self._measured and self._size < self._min_bytes:
            return None
        block = self._take(capacity_for(self._size) if self._size else 0)
        lease = _Lease(block)
        if block.capacity:
            weakref.finalize(lease.array, self._free.append, block)
        return Arena(lease)

    def note(self, arena: Arena) -> None:
        """What the batch built in ``arena`` asked for: the next blocks are made to fit it."""
        self._size = max(self._size, arena.wanted)
        self._measured = True

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
