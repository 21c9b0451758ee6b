"""Thread workers' batch memory: a batch is built in one reused block, which goes back to the
free list only once the consumer has dropped every array of the batch; a loader's workers
share the free list and what was measured."""

from __future__ import annotations

import copy
import gc
import pickle

import numpy as np

from flowloader._worker.buffers import MEASURE_EVERY, BatchBuffers, BlockPool


def build(buffers: BatchBuffers, value: float) -> tuple[np.ndarray, int]:
    arena = buffers.arena()
    assert arena is not None
    batch = arena.allocate_or_empty((4, 1000), np.float32)
    batch[:] = value
    buffers.note(arena)
    return batch, arena.segment.address


def test_the_first_batch_measures_the_rest_reuse_one_block() -> None:
    buffers = BatchBuffers(min_bytes=0, small_bytes=-1)
    first, address = build(buffers, 1)
    assert address == 0  # no block yet: the first batch is ordinary memory
    second, address = build(buffers, 2)
    assert address != 0
    assert second.ctypes.data == address  # built in the block, not copied there
    del second
    gc.collect()
    third, again = build(buffers, 3)
    assert again == address  # the dropped batch's block is reused
    assert first.min() == 1  # and no batch still held was written over
    fourth, other = build(buffers, 4)
    assert other != again  # the third batch is still held: a second block
    assert third.min() == 3
    assert fourth.min() == 4


def test_a_view_the_consumer_keeps_keeps_the_block() -> None:
    buffers = BatchBuffers(min_bytes=0, small_bytes=-1)
    build(buffers, 0)
    batch, address = build(buffers, 5)
    kept = batch[1:2]
    del batch
    gc.collect()
    _, other = build(buffers, 6)
    assert other != address
    assert kept.min() == 5


def test_batches_too_small_to_gain_use_ordinary_memory() -> None:
    buffers = BatchBuffers(min_bytes=1 << 20, small_bytes=-1)
    build(buffers, 0)  # the first batch (16 KB) is measured
    assert buffers.arena() is None


def test_a_large_batch_after_small_ones_gets_blocks() -> None:
    buffers = BatchBuffers(min_bytes=1 << 20, small_bytes=-1)
    build(buffers, 0)  # the first batch (16 KB) is measured: too small
    *ordinary, arena = [buffers.arena() for _ in range(MEASURE_EVERY)]
    assert ordinary == [None] * (MEASURE_EVERY - 1)  # one batch in MEASURE_EVERY is measured
    assert arena is not None
    assert arena.segment.capacity == 0
    large = arena.allocate_or_empty((1 << 20,), np.float32)  # 4 MiB, in ordinary memory
    buffers.note(arena)
    following = buffers.arena()
    assert following is not None
    assert following.segment.capacity >= large.nbytes  # from now on, blocks that fit


def test_workers_sharing_a_pool_share_blocks_and_the_measured_size() -> None:
    pool = BlockPool()
    first = BatchBuffers(min_bytes=0, small_bytes=-1, pool=pool)
    build(first, 0)  # measured
    batch, address = build(first, 1)
    del batch
    gc.collect()
    later = BatchBuffers(min_bytes=0, small_bytes=-1, pool=pool)  # the next epoch's worker
    batch, again = build(later, 2)
    assert again == address  # no batch measured again, and the block reused
    assert pool.nbytes == 0
    del batch
    gc.collect()
    assert pool.nbytes >= 16_000


def test_a_released_pool_drops_its_blocks_and_those_handed_back_later() -> None:
    pool = BlockPool()
    buffers = BatchBuffers(min_bytes=0, small_bytes=-1, pool=pool)
    build(buffers, 0)
    held, _ = build(buffers, 1)
    spare, _ = build(buffers, 2)
    del spare
    gc.collect()
    assert pool.nbytes > 0
    pool.release()
    assert pool.nbytes == 0
    del held
    gc.collect()
    assert pool.nbytes == 0  # handed back after the release: dropped
    BatchBuffers(pool=pool)  # thread workers again: blocks are kept again
    assert pool.holding


def test_a_copied_or_pickled_pool_starts_empty() -> None:
    pool = BlockPool()
    buffers = BatchBuffers(min_bytes=0, small_bytes=-1, pool=pool)
    build(buffers, 0)
    batch, _ = build(buffers, 1)
    del batch
    gc.collect()
    for other in (copy.deepcopy(pool), pickle.loads(pickle.dumps(pool))):
        assert other.nbytes == 0
        assert other.batch_bytes == 0
