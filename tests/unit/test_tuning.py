"""The worker tuner's decisions (num_workers="auto") from scripted measurements: no timing."""

from __future__ import annotations

import pytest

from flowloader._iter.tuning import (
    IN_PROCESS_MEASURE_MAX,
    PROCESSES,
    THREADS,
    Setting,
    WorkerTuner,
)


def feed(
    tuner: WorkerTuner, batches: int, wait: float, step: float, cpu: float = 0.0, **more
) -> list:
    """``batches`` observations; the worker counts of the decisions that came back."""
    return [s.num_workers for s in decisions(tuner, batches, wait, step, cpu, **more)]


def decisions(
    tuner: WorkerTuner, batches: int, wait: float, step: float, cpu: float = 0.0, **more
) -> list[Setting]:
    """``batches`` observations; the settings that came back."""
    found = (tuner.observe(wait, step, cpu, **more) for _ in range(batches))
    return [s for s in found if s is not None]


def warm_up(tuner: WorkerTuner) -> None:
    """The window after a change: the new workers' start-up, which decides nothing."""
    assert decisions(tuner, 8, wait=0.5, step=0.1) == []


def test_cheap_loading_stays_in_process() -> None:
    tuner = WorkerTuner(cores=4)
    assert feed(tuner, 20, wait=0.0005, step=0.02) == []
    assert tuner.num_workers == 0
    assert "in this process" in tuner.changes[0].reason


def test_heavy_loading_gets_the_fewest_workers_that_keep_up() -> None:
    tuner = WorkerTuner(cores=8)
    assert feed(tuner, 1, wait=0.04, step=0.02) == [2]  # 2 workers load 50/s: the loop's pace
    tuner = WorkerTuner(cores=2)
    assert feed(tuner, 10, wait=0.02, step=0.0001) == [2]  # an idle loop: every core
    assert "2 workers give 100.0 batches/s on 2 cores" in tuner.changes[0].reason


def test_the_loop_s_own_cpu_counts_against_the_cores() -> None:
    tuner = WorkerTuner(cores=2)  # the loop is the bottleneck: one worker keeps up
    assert feed(tuner, 1, wait=0.01, step=0.05, cpu=0.05) == [1]
    assert tuner.changes[0].measured["loop_core_use"] == 1.0
    tuner = WorkerTuner(cores=2)  # 50 ms to load, 20 ms of loop CPU: the cores cap the rate
    assert feed(tuner, 1, wait=0.05, step=0.02, cpu=0.02) == [2]
    assert "28.6 batches/s" in tuner.changes[0].reason


def test_waiting_adds_a_worker_up_to_the_cores() -> None:
    tuner = WorkerTuner(cores=4)
    assert feed(tuner, 1, wait=0.04, step=0.04) == [1]
    warm_up(tuner)
    assert feed(tuner, 8, wait=0.05, step=0.1) == [2]
    assert "waited 33%" in tuner.changes[-1].reason
    warm_up(tuner)
    assert feed(tuner, 8, wait=0.05, step=0.1) == [3]
    warm_up(tuner)
    assert feed(tuner, 8, wait=0.05, step=0.1) == [4]
    warm_up(tuner)
    assert feed(tuner, 8, wait=0.05, step=0.1) == []  # no core left


def test_the_window_after_a_change_is_left_out() -> None:
    """The new workers' start-up: the loop waits on them, which says nothing of their pace."""
    tuner = WorkerTuner(cores=4)
    assert feed(tuner, 1, wait=0.04, step=0.04) == [1]
    assert feed(tuner, 8, wait=0.5, step=0.1) == []  # waited 83%: left out
    assert feed(tuner, 8, wait=0.0, step=0.2) == []  # then counted, from a fresh window
    assert feed(tuner, 8, wait=0.05, step=0.1) == [2]


def test_a_new_epoch_s_workers_start_up_too() -> None:
    tuner = WorkerTuner(cores=4)
    assert feed(tuner, 1, wait=0.04, step=0.04) == [1]
    warm_up(tuner)
    assert feed(tuner, 4, wait=0.0, step=0.3) == []  # half a window, then the epoch ends
    tuner.workers_start()
    assert feed(tuner, 8, wait=0.5, step=0.1) == []  # the new workers' start-up: left out
    assert feed(tuner, 8, wait=0.05, step=0.1) == [2]
    in_process = WorkerTuner(cores=4)
    assert feed(in_process, 20, wait=0.0005, step=0.02) == []
    in_process.workers_start()  # no workers: nothing starts up
    assert feed(in_process, 40, wait=0.05, step=0.0001) == [4]


def test_no_waiting_gives_a_core_back_but_not_below_a_count_that_waited() -> None:
    tuner = WorkerTuner(cores=8)
    assert feed(tuner, 1, wait=0.08, step=0.02) == [4]
    warm_up(tuner)
    assert feed(tuner, 8, wait=0.0, step=0.2) == []  # one quiet window: not yet
    assert feed(tuner, 8, wait=0.0, step=0.2) == [3]
    warm_up(tuner)
    assert feed(tuner, 8, wait=0.05, step=0.1) == [4]  # at 3 the loop waited
    assert feed(tuner, 32, wait=0.0, step=0.2) == []  # so 3 is never tried again
    assert [c.num_workers for c in tuner.changes] == [4, 3, 4]


def test_windows_need_batches_and_time() -> None:
    tuner = WorkerTuner(cores=4)
    assert feed(tuner, 1, wait=0.02, step=0.02) == []  # 40 ms measured: still probing
    assert feed(tuner, 1, wait=0.02, step=0.02) == [1]
    warm_up(tuner)
    assert feed(tuner, 7, wait=0.05, step=0.05) == []  # 7 batches: not a window yet
    assert feed(tuner, 1, wait=0.0001, step=0.0001) == []  # 8 batches, but 0.7 s
    assert feed(tuner, 16, wait=0.01, step=0.01) == [2]  # a second on: the loop waited
    assert tuner.as_records()[-1]["num_workers"] == 2


def both_methods(cores: int, **options) -> WorkerTuner:
    return WorkerTuner(cores=cores, methods=(PROCESSES, THREADS), **options)


def test_loading_that_lets_go_of_the_gil_gets_threads() -> None:
    tuner = both_methods(cores=4)
    [setting] = decisions(tuner, 1, wait=0.04, step=0.02, gil_held=0.1)
    assert setting == Setting(2, THREADS, 2)
    assert "threads (the loading holds the GIL 10% of its time)" in tuner.changes[0].reason
    assert tuner.changes[0].measured["gil_held"] == 0.1


def test_loading_that_holds_the_gil_gets_processes() -> None:
    tuner = both_methods(cores=4)
    [setting] = decisions(tuner, 1, wait=0.04, step=0.02, gil_held=0.7)
    assert setting == Setting(2, PROCESSES, 2)
    assert "processes (the loading holds the GIL 70% of its time" in tuner.changes[0].reason


def test_the_loops_own_cpu_counts_as_holding_the_gil() -> None:
    """20 ms of the loop's CPU and 5 ms of the loading's GIL: one GIL for 25 ms a batch,
    busy a quarter of the time, caps 3 threads at 10 batches/s, where processes load 57
    (what 4 cores run)."""
    tuner = both_methods(cores=4)
    [setting] = decisions(tuner, 1, wait=0.05, step=0.02, cpu=0.02, gil_held=0.1)
    assert setting.worker_method == PROCESSES


def test_the_probe_waits_for_the_gil_and_decides_when_it_is_measured() -> None:
    tuner = both_methods(cores=4)
    assert decisions(tuner, 1, wait=0.04, step=0.02) == []  # workers, but of which kind?
    assert tuner.probing
    assert decisions(tuner, 1, wait=0.04, step=0.02, gil_held=0.1) == [Setting(2, THREADS, 2)]
    assert tuner.changes[0].measured["gil_held"] == 0.1
    cheap = both_methods(cores=4)  # loading that stays in process needs no GIL measured
    assert decisions(cheap, 1, wait=0.0004, step=0.05) == []
    assert not cheap.probing
    assert cheap.gil_held is None


def test_an_unmeasured_gil_gets_processes_and_one_method_is_kept() -> None:
    tuner = both_methods(cores=4)
    assert decisions(tuner, 15, wait=0.04, step=0.02) == []
    assert decisions(tuner, 1, wait=0.04, step=0.02)[0].worker_method == PROCESSES
    assert "the GIL was not measured" in tuner.changes[0].reason
    given = WorkerTuner(cores=4, methods=(THREADS,))
    assert decisions(given, 2, wait=0.04, step=0.02, gil_held=0.9)[0].worker_method == THREADS


def test_threads_turn_into_processes_when_another_would_wait_for_the_gil() -> None:
    tuner = both_methods(cores=8)
    # 40 ms loads, 7.5% of it under the GIL: 3 ms a batch serialised, the GIL busy a quarter
    # of the time at most: 83 batches/s
    assert decisions(tuner, 1, wait=0.04, step=0.02, gil_held=0.075)[0] == Setting(2, THREADS, 2)
    warm_up(tuner)
    assert decisions(tuner, 50, wait=0.0, step=0.02) == []  # as predicted: 50 batches/s
    [grown] = decisions(tuner, 8, wait=0.05, step=0.1, busy_s=0.2)
    assert grown == Setting(3, THREADS, 2)  # 3 threads: 75 batches/s, within reach
    warm_up(tuner)
    [grown] = decisions(tuner, 8, wait=0.05, step=0.1, busy_s=0.3)
    assert grown == Setting(4, PROCESSES, 2)  # 4 would want 100: processes
    assert "threads would give 83.3 batches/s" in tuner.changes[-1].reason


def test_prefetch_deepens_when_the_loop_waits_on_idle_workers() -> None:
    tuner = WorkerTuner(cores=4, prefetch=2, tune_prefetch=True)
    assert feed(tuner, 1, wait=0.04, step=0.04) == [1]
    warm_up(tuner)
    # Waiting 33% of the time while the one worker loaded only half of it: not throughput
    [deeper] = decisions(tuner, 8, wait=0.05, step=0.1, busy_s=0.075)
    assert deeper == Setting(1, PROCESSES, 3)
    assert "busy 50%: deeper prefetch" in tuner.changes[-1].reason
    warm_up(tuner)
    [deeper] = decisions(tuner, 8, wait=0.05, step=0.1, busy_s=0.075)
    assert deeper.prefetch_factor == 4
    warm_up(tuner)
    assert decisions(tuner, 8, wait=0.05, step=0.1, busy_s=0.075) == [Setting(2, PROCESSES, 4)]


def test_prefetch_stays_as_given_and_busy_workers_get_company() -> None:
    fixed = WorkerTuner(cores=4, prefetch=2, tune_prefetch=False)
    assert feed(fixed, 1, wait=0.04, step=0.04) == [1]
    warm_up(fixed)
    assert decisions(fixed, 8, wait=0.05, step=0.1, busy_s=0.075) == [Setting(2, PROCESSES, 2)]
    tuned = WorkerTuner(cores=4, prefetch=2, tune_prefetch=True)
    assert feed(tuned, 1, wait=0.04, step=0.04) == [1]
    warm_up(tuned)
    # The worker loaded the whole window: more of them, not more ahead
    assert decisions(tuned, 8, wait=0.05, step=0.1, busy_s=0.15) == [Setting(2, PROCESSES, 2)]


def test_prefetch_deepens_once_every_core_has_a_busy_worker() -> None:
    tuned = WorkerTuner(cores=2, prefetch=2, tune_prefetch=True)
    assert feed(tuned, 1, wait=0.08, step=0.0) == [2]
    warm_up(tuned)
    [deeper] = decisions(tuned, 8, wait=0.1, step=0.05, busy_s=0.3)
    assert deeper == Setting(2, PROCESSES, 3)
    assert "a worker on each core it may use: deeper prefetch" in tuned.changes[-1].reason
    warm_up(tuned)
    assert decisions(tuned, 8, wait=0.1, step=0.05, busy_s=0.3) == [Setting(2, PROCESSES, 4)]
    warm_up(tuned)
    assert decisions(tuned, 8, wait=0.1, step=0.05, busy_s=0.3) == []  # as deep as it goes


def test_large_batches_start_one_ahead_and_deepen_only_for_idle_workers() -> None:
    """Each large batch more in flight is a fresh buffer to fault in; with every core's
    worker busy, a deeper queue cannot load faster."""
    tuned = WorkerTuner(cores=2, prefetch=2, tune_prefetch=True, batch_bytes=37 << 20)
    assert decisions(tuned, 1, wait=0.08, step=0.0) == [Setting(2, PROCESSES, 1)]
    assert "prefetch 1 (batches of 37.0 MiB)" in tuned.changes[0].reason
    warm_up(tuned)
    assert decisions(tuned, 8, wait=0.1, step=0.05, busy_s=0.3) == []  # every core busy
    [deeper] = decisions(tuned, 8, wait=0.1, step=0.05, busy_s=0.15)  # idle half the time
    assert deeper == Setting(2, PROCESSES, 2)
    given = WorkerTuner(cores=2, prefetch=2, tune_prefetch=False, batch_bytes=37 << 20)
    assert decisions(given, 1, wait=0.08, step=0.0) == [Setting(2, PROCESSES, 2)]


def test_a_memory_limit_lowers_the_count_and_caps_what_comes_later() -> None:
    tuner = WorkerTuner(cores=8)
    assert feed(tuner, 1, wait=0.08, step=0.02) == [4]
    assert tuner.limit(2) == Setting(2, PROCESSES, 2)
    assert tuner.changes[-1].reason == "memory_budget allows 2 workers"
    assert tuner.limit(3) is None
    warm_up(tuner)
    assert feed(tuner, 8, wait=0.05, step=0.1) == [3]  # up to the new limit, no further
    warm_up(tuner)
    assert feed(tuner, 16, wait=0.05, step=0.1) == []
    assert WorkerTuner(cores=4, max_workers=0).observe(0.05, 0.01, 0.0) is None


def test_in_process_windows_probe_again_rather_than_count_the_wait() -> None:
    """In process the loop always 'waits' (it loads): cheap loading must stay there."""
    tuner = WorkerTuner(cores=4)
    assert feed(tuner, 20, wait=0.0005, step=0.0001) == []
    assert feed(tuner, 4000, wait=0.0005, step=0.0001) == []  # windows of a second: stays
    assert tuner.num_workers == 0
    assert feed(tuner, 40, wait=0.05, step=0.0001) == [4]  # the loading grew: workers


def test_in_process_a_batch_is_measured_every_few_milliseconds() -> None:
    """The probe and workers: every batch is measured. Settled in process, one batch about
    every 2 ms, and none skipped where a batch takes longer."""
    tuner = WorkerTuner(cores=4)
    assert tuner.unmeasured_between == 0
    assert feed(tuner, 20, wait=0.00002, step=0.00002) == []  # 40 us a batch: in process
    assert tuner.unmeasured_between == IN_PROCESS_MEASURE_MAX
    slow = WorkerTuner(cores=4)
    assert feed(slow, 4, wait=0.0005, step=0.02) == []  # 20.5 ms a batch: in process
    assert slow.unmeasured_between == 0
    busy = WorkerTuner(cores=4)
    assert feed(busy, 1, wait=0.04, step=0.04) == [1]
    assert busy.unmeasured_between == 0


def test_a_measured_batch_stands_for_those_unmeasured_before_it() -> None:
    """Loading that grows while batches go unmeasured: each measured one counts as the 33
    batches it stands for, so two fill a window (8 batches, 1 s) and workers start."""
    tuner = WorkerTuner(cores=4)
    assert feed(tuner, 16, wait=0.00002, step=0.00002) == []  # the probe's 16 batches
    stands_for = IN_PROCESS_MEASURE_MAX + 1
    assert tuner.observe(0.02, 0.0001, 0.0, batches=stands_for) is None  # 0.66 s
    assert tuner.observe(0.02, 0.0001, 0.0, batches=stands_for) == Setting(4, PROCESSES, 2)
    assert tuner.changes[-1].measured["batches"] == 2 * stands_for
    assert tuner.unmeasured_between == 0


def test_a_choice_short_of_its_prediction_tries_the_other_kind_and_keeps_the_faster() -> None:
    """(Each window below is one window: 8 batches and a second at least.)"""
    tuner = both_methods(cores=2)
    # 50 ms loads, 10% of it under the GIL: 2 threads predicted at 40 batches/s
    assert decisions(tuner, 1, wait=0.05, step=0.001, gil_held=0.1) == [Setting(2, THREADS, 2)]
    warm_up(tuner)
    # they give 12.5 (a busy machine misread the GIL): processes are tried, as many
    assert decisions(tuner, 13, wait=0.079, step=0.001) == [Setting(2, PROCESSES, 2)]
    assert "gave 12.5 batches/s against the 40.0 predicted" in tuner.changes[-1].reason
    warm_up(tuner)
    assert decisions(tuner, 41, wait=0.024, step=0.001) == []  # 40 batches/s: kept
    assert tuner.method == PROCESSES
    # later windows follow the usual rules: the loop still waits, no core is left
    assert decisions(tuner, 41, wait=0.024, step=0.001) == []


def test_a_tried_kind_no_faster_beyond_the_noise_gives_way_to_the_first() -> None:
    tuner = both_methods(cores=2)
    assert decisions(tuner, 1, wait=0.05, step=0.001, gil_held=0.7) == [Setting(2, PROCESSES, 2)]
    warm_up(tuner)
    assert decisions(tuner, 13, wait=0.079, step=0.001) == [Setting(2, THREADS, 2)]
    warm_up(tuner)
    # threads: 13.3 batches/s against 12.5, within the noise (15% at least)
    assert decisions(tuner, 14, wait=0.074, step=0.001) == [Setting(2, PROCESSES, 2)]
    assert "not more than multiprocessing's 12.5 beyond the noise" in tuner.changes[-1].reason
    warm_up(tuner)
    assert decisions(tuner, 13, wait=0.079, step=0.001) == []  # revisited once only


def test_a_choice_within_the_noise_of_its_prediction_or_a_loop_that_waits_not_stays() -> None:
    within = both_methods(cores=2)
    assert decisions(within, 1, wait=0.05, step=0.001, gil_held=0.1) == [Setting(2, THREADS, 2)]
    warm_up(within)
    assert decisions(within, 60, wait=0.0165, step=0.001) == []  # 57 of 40: fine
    slow_loop = both_methods(cores=2)
    assert decisions(slow_loop, 1, wait=0.05, step=0.001, gil_held=0.1)[0].num_workers == 2
    warm_up(slow_loop)
    # 9 batches/s, but the loop's own step sets the pace (waited 1%): not the workers'
    assert decisions(slow_loop, 16, wait=0.001, step=0.11) == []
    assert slow_loop.method == THREADS
    only = WorkerTuner(cores=2)  # processes given: nothing to try instead
    assert decisions(only, 1, wait=0.05, step=0.001) == [Setting(2, PROCESSES, 2)]
    warm_up(only)
    assert decisions(only, 16, wait=0.079, step=0.001) == []


def test_the_noise_is_the_spread_of_the_window_s_batch_times() -> None:
    from flowloader._iter.tuning import PREDICTION_NOISE_MIN, _Window

    steady = _Window()
    for _ in range(16):
        steady.add(0.01, 0.01, 0.0, 0.0, 1)
    assert steady.rate == 50.0
    assert steady.noise == PREDICTION_NOISE_MIN
    uneven = _Window()
    for k in range(16):
        uneven.add(0.001 if k % 2 else 0.1, 0.0, 0.0, 0.0, 1)
    # mean 50.5 ms, spread 49.5 ms, over 4 = sqrt(16): two standard errors are 49%
    assert uneven.noise == pytest.approx(2 * 0.0495 / (0.0505 * 4))
    assert _Window().noise == 1.0
