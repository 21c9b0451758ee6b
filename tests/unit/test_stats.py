from __future__ import annotations

import time

from flowloader import stats


def test_stage_records_into_the_active_clock() -> None:
    clock = stats.StageClock()
    previous = stats.set_clock(clock)
    try:
        with stats.stage("transform"):
            time.sleep(0.002)
        with stats.stage("transform"):
            pass
    finally:
        stats.set_clock(previous)
    assert clock.transform >= 0.002
    assert clock.take()["transform"] >= 0.002
    assert not any(clock.take().values())  # take() resets


def test_stage_without_a_clock_is_a_no_op() -> None:
    previous = stats.set_clock(None)
    try:
        with stats.stage("transform"):
            pass
    finally:
        stats.set_clock(previous)


def test_verdicts() -> None:
    s = stats.LoaderStats(num_workers=2, elapsed_s=10.0, worker_busy_s=19.0)
    s.stage_s["wait"] = 5.0
    assert s.data_wait_fraction == 0.5
    assert s.input_bound
    assert "saturated" in s.verdict()
    s.worker_busy_s = 4.0
    assert "prefetch_factor" in s.verdict()
    s.stage_s["wait"] = 0.5
    assert not s.input_bound
    empty = stats.LoaderStats()
    assert empty.data_wait_fraction == 0.0
    assert empty.cores_used == 0.0


def test_merging_epochs_adds_times_and_counts() -> None:
    first = stats.LoaderStats(
        num_workers=2,
        batches=30,
        elapsed_s=3.0,
        worker_cpu_s=5.8,
        main_cpu_s=0.1,
        worker_busy_s=5.5,
        first_batch_s=0.3,
    )
    first.stage_s["wait"] = 1.0
    second = stats.LoaderStats(
        num_workers=2, batches=1, elapsed_s=0.1, worker_cpu_s=0.0, main_cpu_s=0.05
    )
    second.stage_s["wait"] = 0.1
    merged = stats.LoaderStats.merged([first, second])
    assert merged.batches == 31
    assert merged.stage_s["wait"] == 1.1
    assert merged.first_batch_s == 0.3
    assert abs(merged.cores_used - (5.95 / 3.1)) < 1e-9  # not the short last epoch's 0.5
