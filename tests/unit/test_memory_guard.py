"""MemoryGuard's arithmetic: how many workers and batches fit in the budget."""

from __future__ import annotations

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
