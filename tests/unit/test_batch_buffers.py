"""Thread workers' batch memory: a batch is built in one reused block, which goes back to the
free list only once the consumer has dropped every array of the batch."""

from __future__ import annotations

import gc

import numpy as np

from flowloader._worker.buffers import MEASURE_EVERY, BatchBuffers


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
