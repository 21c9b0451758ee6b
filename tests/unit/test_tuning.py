"""The worker tuner's decisions (num_workers="auto") from scripted measurements: no timing."""

from __future__ import annotations

from flowloader._iter.tuning import WorkerTuner


def feed(tuner: WorkerTuner, batches: int, wait: float, step: float, cpu: float = 0.0) -> list:
    """``batches`` observations; the decisions that came back."""
    return [d for _ in range(batches) if (d := tuner.observe(wait, step, cpu)) is not None]


def test_cheap_loading_stays_in_process() -> None:
    tuner = WorkerTuner(cores=4)
    assert feed(tuner, 20, wait=0.0005, step=0.02) == []
    assert tuner.num_workers == 0
    assert "in this process" in tuner.changes[0].reason


def test_heavy_loading_gets_the_fewest_workers_that_keep_up() -> None:
    tuner = WorkerTuner(cores=8)
    assert feed(tuner, 2, wait=0.04, step=0.02) == [2]  # 2 workers load 50/s: the loop's pace
    tuner = WorkerTuner(cores=2)
    assert feed(tuner, 10, wait=0.02, step=0.0001) == [2]  # an idle loop: every core
    assert "2 workers give 100.0 batches/s on 2 cores" in tuner.changes[0].reason


def test_the_loop_s_own_cpu_counts_against_the_cores() -> None:
    tuner = WorkerTuner(cores=2)  # the loop is the bottleneck: one worker keeps up
    assert feed(tuner, 2, wait=0.01, step=0.05, cpu=0.05) == [1]
    assert tuner.changes[0].measured["loop_core_use"] == 1.0
    tuner = WorkerTuner(cores=2)  # 50 ms to load, 20 ms of loop CPU: the cores cap the rate
    assert feed(tuner, 2, wait=0.05, step=0.02, cpu=0.02) == [2]
    assert "28.6 batches/s" in tuner.changes[0].reason


def test_waiting_adds_a_worker_up_to_the_cores() -> None:
    tuner = WorkerTuner(cores=4)
    assert feed(tuner, 2, wait=0.04, step=0.04) == [1]
    assert feed(tuner, 8, wait=0.05, step=0.1) == [2]
    assert "waited 33%" in tuner.changes[-1].reason
    assert feed(tuner, 16, wait=0.05, step=0.1) == [3, 4]
    assert feed(tuner, 8, wait=0.05, step=0.1) == []  # no core left


def test_no_waiting_gives_a_core_back_but_not_below_a_count_that_waited() -> None:
    tuner = WorkerTuner(cores=8)
    assert feed(tuner, 2, wait=0.08, step=0.02) == [4]
    assert feed(tuner, 8, wait=0.0, step=0.2) == []  # one quiet window: not yet
    assert feed(tuner, 8, wait=0.0, step=0.2) == [3]
    assert feed(tuner, 8, wait=0.05, step=0.1) == [4]  # at 3 the loop waited
    assert feed(tuner, 32, wait=0.0, step=0.2) == []  # so 3 is never tried again
    assert [c.num_workers for c in tuner.changes] == [4, 3, 4]


def test_windows_need_batches_and_time() -> None:
    tuner = WorkerTuner(cores=4)
    assert feed(tuner, 1, wait=0.1, step=0.1) == []  # one batch: still probing
    assert feed(tuner, 1, wait=0.1, step=0.1) == [1]
    assert feed(tuner, 7, wait=0.05, step=0.05) == []  # 7 batches: not a window yet
    assert feed(tuner, 1, wait=0.0001, step=0.0001) == []  # 8 batches, but 0.7 s
    assert feed(tuner, 16, wait=0.01, step=0.01) == [2]  # a second on: the loop waited
    assert tuner.as_records()[-1]["num_workers"] == 2
