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


def test_heavy_loading_gets_workers_to_keep_up_within_the_cores() -> None:
    tuner = WorkerTuner(cores=8)
    assert feed(tuner, 4, wait=0.04, step=0.02) == [3]  # 1.25 * 40 / 20 -> 3
    tuner = WorkerTuner(cores=2)
    assert feed(tuner, 10, wait=0.02, step=0.0001) == [2]  # an idle loop: every core
    assert "more than fit keep up" in tuner.changes[0].reason


def test_a_computing_loop_keeps_its_core() -> None:
    tuner = WorkerTuner(cores=2)
    assert feed(tuner, 4, wait=0.05, step=0.02, cpu=0.02) == [1]  # wanted 4
    assert tuner.changes[0].measured["loop_core_use"] == 1.0


def test_waiting_adds_a_worker_while_a_core_is_spare() -> None:
    tuner = WorkerTuner(cores=4)
    feed(tuner, 4, wait=0.04, step=0.04)  # 2 workers
    assert tuner.num_workers == 2
    assert feed(tuner, 8, wait=0.05, step=0.1) == [3]
    assert "waited 33%" in tuner.changes[-1].reason
    assert feed(tuner, 8, wait=0.05, step=0.1) == [4]
    assert feed(tuner, 8, wait=0.05, step=0.1) == []  # no core left


def test_no_waiting_gives_a_core_back_but_not_below_a_count_that_waited() -> None:
    tuner = WorkerTuner(cores=8)
    feed(tuner, 4, wait=0.08, step=0.02)  # 5 workers
    assert tuner.num_workers == 5
    assert feed(tuner, 8, wait=0.0, step=0.2) == []  # one quiet window: not yet
    assert feed(tuner, 8, wait=0.0, step=0.2) == [4]
    assert feed(tuner, 8, wait=0.05, step=0.1) == [5]  # at 4 the loop waited
    assert feed(tuner, 32, wait=0.0, step=0.2) == []  # so 4 is never tried again
    assert [c.num_workers for c in tuner.changes] == [5, 4, 5]


def test_a_loop_that_grows_busier_takes_its_core_back() -> None:
    tuner = WorkerTuner(cores=2)
    feed(tuner, 10, wait=0.02, step=0.0001)
    assert tuner.num_workers == 2
    assert feed(tuner, 8, wait=0.005, step=0.2, cpu=0.2) == [1]
    assert "1 workers fit beside it" in tuner.changes[-1].reason


def test_windows_need_batches_and_time() -> None:
    tuner = WorkerTuner(cores=4)
    assert feed(tuner, 3, wait=0.1, step=0.1) == []  # 0.6 s, but 3 batches: still probing
    assert feed(tuner, 1, wait=0.1, step=0.1) == [2]
    assert feed(tuner, 7, wait=0.05, step=0.05) == []  # 7 batches: not a window yet
    assert feed(tuner, 1, wait=0.0001, step=0.0001) == []  # 8 batches, but 0.7 s
    assert feed(tuner, 16, wait=0.01, step=0.01) == [3]  # a second on: the loop waited
    assert tuner.as_records()[-1]["num_workers"] == 3
