"""Pools keep what the pipeline needs, not their high-water mark: once the batches a loop
kept come back, a pool gives back the blocks (segments) beyond the most it has had in use at
once over its last RECENT_TAKES batches."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from flowloader._ipc import shm
from flowloader._ipc.segment_pool import RECENT_TAKES, Demand, SegmentPool, capacity_for
from flowloader._worker.buffers import BatchBuffers, BlockPool


def test_demand_is_the_most_in_use_over_the_recent_takes() -> None:
    demand = Demand(span=3)
    assert demand.spare(0) == 0  # nothing taken yet: nothing worth keeping
    for in_use in (1, 5, 2):
        demand.took(in_use)
    assert demand.spare(0) == 5
    assert demand.spare(4) == 1
    assert demand.spare(7) == 0
    demand.took(2)
    demand.took(2)  # the 5 is three takes back: forgotten
    assert demand.spare(0) == 2


def test_a_restart_forgets_the_old_takes_once_half_a_span_of_new_ones_is_seen() -> None:
    demand = Demand(span=8)
    for in_use in (1, 2, 30, 3):
        demand.took(in_use)
    demand.restart()
    for in_use in (1, 2, 3):
        demand.took(in_use)
        assert demand.spare(0) == 30  # the new workers have shown too little yet
    demand.took(2)
    assert demand.spare(0) == 3
    demand.restart()  # a restart with a full span: the old go as new ones push them out
    for in_use in (1,) * 8:
        demand.took(in_use)
    assert demand.spare(0) == 1


@pytest.fixture
def segments():
    prefix = f"{shm.process_prefix()}demand_"
    pool = SegmentPool(prefix)
    yield pool, prefix
    pool.close(main_gone=True)
    assert shm.list_segments(prefix) == []


def test_a_segment_pool_gives_back_what_a_held_epoch_made_once_batches_go_one_at_a_time(
    segments,
) -> None:
    pool, prefix = segments
    held = [pool.take(1000).name for _ in range(20)]  # an epoch whose batches the loop keeps
    pool.release(tuple(held))
    assert pool.segment_count == 20  # just after: the pipeline needed 20 at once lately
    assert pool.pop_retired() == ()
    for _ in range(RECENT_TAKES):  # later: two in use at a time (one loading, one held)
        first = pool.take(1000)
        second = pool.take(1000)
        pool.release((first.name,))
        pool.release((second.name,))
    assert pool.segment_count == 2
    retired = pool.pop_retired()
    assert len(retired) == 18
    assert len(shm.list_segments(prefix)) == 2  # the retired ones' files are gone


def test_a_segment_given_back_unsent_counts_as_free(segments) -> None:
    pool, _ = segments
    taken = pool.take(1000)
    pool.give_back(taken)
    assert pool.take(1000) is taken
    assert pool.segment_count == 1


def test_segments_the_main_process_retires_go_now_if_free_else_once_released(segments) -> None:
    pool, prefix = segments
    taken = [pool.take(1000) for _ in range(4)]
    pool.release((taken[0].name, taken[1].name))
    pool.retire((taken[0].name, taken[2].name, "not-a-segment"))
    assert pool.segment_count == 3  # the free one is gone; the busy one stays while busy
    pool.release((taken[2].name, taken[3].name))
    assert pool.segment_count == 2  # released: retired, not reused
    assert set(pool.pop_retired()) == {taken[0].name, taken[2].name}
    assert sorted(shm.list_segments(prefix)) == sorted([taken[1].name, taken[3].name])
    assert {pool.take(1000).name, pool.take(1000).name} == {taken[1].name, taken[3].name}


def test_a_block_pool_keeps_at_most_a_count_lent_ones_included() -> None:
    pool = BlockPool()
    lent = [pool.take(100) for _ in range(6)]
    for block in lent[:4]:
        pool.give_back(block)
    pool.keep_at_most(3)
    assert (pool.lent, len(pool.free)) == (2, 1)
    pool.keep_at_most(1)
    assert (pool.lent, len(pool.free)) == (2, 0)


def build(buffers: BatchBuffers) -> np.ndarray:
    arena = buffers.arena()
    assert arena is not None
    batch = arena.allocate_or_empty((4, 1000), np.float32)
    batch[:] = 1
    buffers.note(arena)
    return batch


def test_a_block_pool_gives_back_what_a_held_epoch_made() -> None:
    pool = BlockPool()
    buffers = BatchBuffers(min_bytes=0, small_bytes=-1, pool=pool)
    build(buffers)  # measured: later batches get blocks
    held = [build(buffers) for _ in range(20)]
    assert (pool.lent, len(pool.free)) == (20, 0)
    assert pool.lent_bytes == 20 * capacity_for(pool.batch_bytes)
    del held
    gc.collect()
    assert (pool.lent, len(pool.free)) == (0, 20)
    for _ in range(RECENT_TAKES):  # one batch at a time (its block back at its last reference)
        batch = build(buffers)
        del batch
    assert (pool.lent, len(pool.free)) == (0, 1)
    assert pool.nbytes == pool.free[0].capacity


def test_a_block_pool_keeps_what_the_pipeline_cycles_through() -> None:
    pool = BlockPool()
    buffers = BatchBuffers(min_bytes=0, small_bytes=-1, pool=pool)
    build(buffers)
    window = [build(buffers) for _ in range(3)]  # three in flight at a time
    for _ in range(2 * RECENT_TAKES):
        window.pop(0)  # its block back at its last reference, no collection needed
        window.append(build(buffers))
    del window
    gc.collect()
    assert (pool.lent, len(pool.free)) == (0, 3)
