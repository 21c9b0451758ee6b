"""MemoryGuard's arithmetic: how many workers and batches fit in the budget."""

from __future__ import annotations

import warnings

import numpy as np

from flowloader._iter.memory import MAX_WORKERS, MemoryGuard

MB = 1 << 20


def guard(budget: int, batch: int, each: float) -> MemoryGuard:
    found = MemoryGuard(budget, estimate_workers=False)
    found.batch_bytes = batch
    found.worker_estimate = int(each)
    return found


def counted(g: MemoryGuard, prefetch: int) -> int:
    """The definition, one count at a time."""
    fits = 0
    for n in range(1, MAX_WORKERS + 1):
        if n * g.each_worker + (n * prefetch + 1) * g.batch_bytes > g.budget:
            break
        fits = n
    return fits


def test_workers_allowed_is_the_largest_count_that_fits() -> None:
    rng = np.random.default_rng(0)
    for _ in range(2000):
        budget = int(rng.integers(1, 4096)) * MB
        batch = int(rng.integers(0, 64 * MB))
        each = float(rng.integers(0, 512 * MB))
        g = guard(budget, batch, each)
        for prefetch in (1, 2, 4):
            assert g.workers_allowed(prefetch) == counted(g, prefetch), (budget, batch, each)


def test_workers_allowed_at_the_edges() -> None:
    assert guard(100 * MB, 0, 0).workers_allowed(2) == MAX_WORKERS  # nothing measured yet
    assert guard(100 * MB, 40 * MB, 0).workers_allowed(1) == 1  # 40 + 40 fit, 40 x 3 not
    assert guard(100 * MB, 60 * MB, 0).workers_allowed(1) == 0  # the loop's batch and one
    exact = guard(40 * MB, 10 * MB, 10 * MB)  # a worker, its batch and the loop's: 30 MB
    assert exact.workers_allowed(prefetch=1) == 1


def test_thread_blocks_lent_beyond_those_in_flight_are_the_loop_s() -> None:
    from flowloader._worker.buffers import BlockPool

    pool = BlockPool()
    blocks = [pool.take(MB) for _ in range(5)]  # 2 in flight, 3 handed out and kept
    pool.give_back(pool.take(MB))  # and one free
    g = MemoryGuard(64 * MB, estimate_workers=False)
    g.measure(np.zeros(MB, np.uint8), [], None, held=3, blocks=pool)
    assert (g.loop_batches, g.loop_bytes) == (3, 3 * MB)
    assert g.batches_bytes == 2 * MB + pool.nbytes
    assert g.as_dict()["loop_bytes"] == 3 * MB
    del blocks


def test_a_measurement_is_due_as_the_loop_s_blocks_pass_the_budget_whatever_the_clock() -> None:
    """Thread workers' blocks lent, growing one batch at a time: measured when they have
    doubled, and at each batch once they hold more than the budget until the loop is warned
    (between those the clock decides, and here it never comes)."""
    from flowloader._worker.buffers import BlockPool

    pool = BlockPool()
    g = MemoryGuard(10 * MB, estimate_workers=False)
    lent = [pool.take(MB) for _ in range(3)]  # a batch handed out and two in flight
    g.measure(np.zeros(MB, np.uint8), [], None, held=3, blocks=pool)
    g._next_at = float("inf")  # the clock never ticks
    due = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(12):  # the loop keeps each batch
            lent.append(pool.take(MB))
            due.append(g.due(pool))
            if due[-1]:
                g.measure(np.zeros(MB, np.uint8), [], None, held=3, blocks=pool)
                g._next_at = float("inf")
    # Lent 4, 5, 6: no. 7: more than twice the 3 of the first measurement. 8-10: no (10 MB
    # is not past the budget). 11, 12: past it, the loop's part (all but the 2 in flight)
    # 9 and 10 MB, not past: measured, not warned. 13: the loop's 11 MB pass it: warned.
    # 14, 15: no (back to the doubling, from 13, and the clock).
    assert due == [False] * 3 + [True] + [False] * 3 + [True] * 3 + [False] * 2
    warned = [str(w.message) for w in caught if "the loop keeps" in str(w.message)]
    assert len(warned) == 1
    assert "the loop keeps 11 batches" in warned[0]
    del lent


def test_a_worker_is_counted_at_what_it_adds_not_its_share_of_its_parent() -> None:
    import os

    from flowloader._iter.memory import worker_bytes

    with open("/proc/self/smaps_rollup") as rollup:
        fields = {
            line.split(":")[0]: int(line.split()[1]) * 1024 for line in rollup if "kB" in line
        }
    own = worker_bytes(os.getpid())
    assert own is not None
    unique = fields["Private_Clean"] + fields["Private_Dirty"]
    assert unique - 16 * MB < own <= unique + 16 * MB  # (it moves while we look)
    assert worker_bytes(2**22 + 1) is None  # no such process


def test_dataset_caches_are_found_through_wrappers_once_and_take_room() -> None:
    import flowloader as fl
    from flowloader._iter.memory import cache_bytes

    class Cached(fl.Dataset):
        def __init__(self, held: int) -> None:
            self.cached_bytes = held

        def __len__(self) -> int:
            return 4

        def __getitem__(self, i: int) -> int:
            return i

    table, other = Cached(3 * MB), Cached(MB)
    mix = fl.Mixture({"a": fl.Subset(table, [0, 1]), "b": other}, [0.5, 0.5])
    both = fl.ConcatDataset([mix, fl.Subset(table, [2, 3])])  # the table counted once
    assert cache_bytes(both) == 4 * MB
    assert cache_bytes(np.arange(3)) == 0
    g = guard(20 * MB, MB, 0)
    before = g.in_flight_allowed(2, processes=False)
    g.measure(np.zeros(MB, np.uint8), [], None, held=1, caches=4 * MB)
    assert g.as_dict()["caches_bytes"] == 4 * MB
    assert g.in_flight_allowed(2, processes=False) == before - 4
    assert g.peak >= 4 * MB
