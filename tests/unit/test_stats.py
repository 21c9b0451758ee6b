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
