"""Reused batch memory for thread workers (and Ray actors): batches collated in place in
ordinary memory.

A thread worker hands its batch over as it is, so the batch's memory cannot be reused until
the consumer drops the batch. Each batch is built in one block (bump-allocated by an Arena, as
a process worker builds its batch in one shared-memory segment); when the last array viewing
the block is gone, the block goes back to its worker's free list. In steady state no batch
memory is allocated or faulted in: an ImageNet batch of 64 float images is 38 MB, which
``numpy.empty`` would map afresh (and the kernel zero) every time.

A loader's thread workers share one ``BlockPool`` across its epochs: a new epoch's threads
(``persistent_workers=False``) take the blocks the last epoch's left, with the batch size it
measured, rather than fault fresh ones in. ImageNet training on 2 threads at prefetch 1
faulted 63,900 pages an epoch that way, and ran at 31.6 batches/s against 34.3 with the
blocks kept (34.6 with persistent workers; 8 interleaved epochs each). The pool holds the
blocks until the loader goes, or until it loads with another kind of worker.

Only batches that large gain. Below glibc's largest mmap threshold (32 MiB) malloc keeps freed
memory in its heap and hands it out again by itself, and the blocks' bookkeeping only costs:
MNIST batches (200 KB) ran 20% slower through them. So batches are measured (the first, then
one in MEASURE_EVERY while they stay small, for datasets whose later batches are large), and
the blocks are used once a batch is at least that large.
"""

from __future__ import annotations

import collections
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .._ipc import messages
from .._ipc.batch_codec import SMALL_LEAF_BYTES
from .._ipc.segment_pool import Arena, Demand, capacity_for
from ..randomness import SampleSeeds
from .allocator import MMAP_THRESHOLD_BYTES
from .body import WorkerBody, WorkerConfig

# The smallest batch worth a block. Private: tests lower it to reach the blocks with small
# batches. Read when a BatchBuffers is made, i.e. when a worker thread starts.
MIN_BLOCK_BYTES = MMAP_THRESHOLD_BYTES
# Arrays up to this size are made in ordinary memory, not in the block: a loop that keeps
# each batch's labels would otherwise keep every block. Private, read as MIN_BLOCK_BYTES is.
SMALL_ARRAY_BYTES = SMALL_LEAF_BYTES
# While batches are too small, one in this many is measured again (in a memoryless arena that
# only tallies what it is asked for): cheap, and later large batches still get blocks.
MEASURE_EVERY = 64


class _Block:
    """Memory for one batch at a time."""

    __slots__ = ("capacity", "memory")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.memory = bytearray(capacity)


_NO_MEMORY = _Block(0)  # a measuring arena's: every allocation falls back to ordinary memory


class BlockPool:
    """Free blocks and the largest batch measured, shared by a loader's thread workers over
    its epochs, and what is lent out (blocks whose batch is in flight or held by the loop).
    A copy or a pickle starts empty (blocks are this process's memory)."""

    def __init__(self) -> None:
        self.free: collections.deque[_Block] = collections.deque()
        self.batch_bytes = 0  # the largest batch measured so far
        self.holding = True  # False: blocks handed back are dropped (release())
        self.lent = 0  # blocks taken and not handed back
        self.lent_bytes = 0
        self.demand = Demand()
        # Between epochs (keep_at_most): the most blocks kept in all, lent ones included,
        # until the next epoch begins (None: as the demand says).
        self._between_epochs: int | None = None
        # Blocks come back from finalizers, in whichever thread drops a batch (re-entrant: a
        # collection inside take() may hand one back).
        self._lock = threading.RLock()

    def __reduce__(self) -> tuple[type[BlockPool], tuple[()]]:
        return BlockPool, ()

    def take(self, capacity: int) -> _Block:
        """A free block of at least ``capacity`` bytes, else a new one (smaller free ones,
        from smaller batches, are dropped)."""
        with self._lock:
            block = None
            while self.free:
                candidate = self.free.popleft()
                if candidate.capacity >= capacity:
                    block = candidate
                    break
            if block is None:
                block = _Block(capacity)
            self.lent += 1
            self.lent_bytes += block.capacity
            self.demand.took(self.lent)
            return block

    def give_back(self, block: _Block) -> None:
        """A block whose batch is gone: free again, unless the pool was released or holds
        as many as the pipeline has needed lately."""
        with self._lock:
            self.lent -= 1
            self.lent_bytes -= block.capacity
            if self.holding:
                self.free.append(block)
            spare = self.demand.spare(self.lent)
            if self._between_epochs is not None:  # a held epoch's blocks: not kept
                spare = min(spare, max(self._between_epochs - self.lent, 0))
            while len(self.free) > spare:
                self.free.popleft()

    def shed(self, nbytes: int) -> None:
        """Drop free blocks, the oldest first, until ``nbytes`` are dropped or none is left
        (memory_budget, over its budget)."""
        dropped = 0
        with self._lock:
            while self.free and dropped < nbytes:
                dropped += self.free.popleft().capacity

    def keep_at_most(self, count: int) -> None:
        """Drop free blocks, the oldest first, beyond ``count`` blocks in all (those lent
        included): after an epoch, the pipeline needs ``prefetch_factor x workers + 2``.
        Until the next epoch begins (:meth:`open_epoch`), blocks handed back are kept only
        up to that count: a loop that kept the epoch's batches gives their blocks back when
        it lets go of them, not at the next epoch's end."""
        with self._lock:
            self._between_epochs = count
            while self.free and len(self.free) + self.lent > count:
                self.free.popleft()

    def open_epoch(self) -> None:
        """A new epoch: blocks handed back are kept as its demand says."""
        with self._lock:
            self._between_epochs = None

    def hold(self) -> None:
        """Keep blocks handed back (thread workers start), as many as the new workers use:
        what the last ones used at once (an epoch whose batches the loop kept) is forgotten
        once they have taken a few (Demand.restart)."""
        with self._lock:
            self.holding = True
            self._between_epochs = None
            self.demand.restart()

    def release(self) -> None:
        """Drop the free blocks and those handed back later (the loader goes on without
        thread workers)."""
        with self._lock:
            self.holding = False
            self.free.clear()

    @property
    def nbytes(self) -> int:
        """The free blocks' bytes."""
        return sum(block.capacity for block in list(self.free))


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
    ``min_bytes``: the smallest batch worth a block (default MIN_BLOCK_BYTES);
    ``small_bytes``: arrays up to this size are left out of blocks (SMALL_ARRAY_BYTES);
    ``pool``: where free blocks wait, shared with the loader's other workers (default: its
    own)."""

    def __init__(
        self,
        min_bytes: int | None = None,
        small_bytes: int | None = None,
        pool: BlockPool | None = None,
    ) -> None:
        self._pool = BlockPool() if pool is None else pool
        self._pool.hold()
        # At least a byte: blocks are made to fit a batch measured first.
        self._min_bytes = max(MIN_BLOCK_BYTES if min_bytes is None else min_bytes, 1)
        self._small_bytes = SMALL_ARRAY_BYTES if small_bytes is None else small_bytes
        self._small_left = 0  # small batches to build in ordinary memory before measuring one

    def arena(self) -> Arena | None:
        """An arena for the next batch; None when batches are too small to gain (ordinary
        memory). Until a batch that large is measured, every MEASURE_EVERY-th arena (the first
        included) has no memory: its arrays are ordinary ones, and it measures the batch."""
        if self._pool.batch_bytes >= self._min_bytes:
            return self._block_arena()
        if self._small_left:  # the small-batch path: integer tests only
            self._small_left -= 1
            return None
        self._small_left = MEASURE_EVERY - 1
        return Arena(_Lease(_NO_MEMORY))

    def note(self, arena: Arena) -> None:
        """What the batch built in ``arena`` asked for: the next blocks are made to fit it."""
        pool = self._pool
        pool.batch_bytes = max(pool.batch_bytes, arena.wanted)

    def _block_arena(self) -> Arena:
        block = self._pool.take(capacity_for(self._pool.batch_bytes))
        lease = _Lease(block)
        weakref.finalize(lease.array, self._pool.give_back, block)
        return Arena(lease, small_bytes=self._small_bytes)


class BufferedWorker(WorkerBody):
    """A worker body whose batches are collated into reused blocks: a thread's, handed over
    as they are, and a Ray actor's, copied into the object store when its task returns (the
    block is free again at once)."""

    def __init__(
        self, config: WorkerConfig, send: Callable[[Any], None], pool: BlockPool | None = None
    ) -> None:
        super().__init__(config, send)
        self.buffers = BatchBuffers(pool=pool)

    def _reserve(self) -> Arena | None:
        return self.buffers.arena()

    def _fetch(self, task: messages.Task, seeds: SampleSeeds | None, arena: Any) -> Any:
        try:
            return super()._fetch(task, seeds, arena)
        finally:
            if arena is not None:  # (batches too small to gain from a block have none)
                self.buffers.note(arena)
