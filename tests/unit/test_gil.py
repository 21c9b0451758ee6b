"""The GIL sampler: how much of what runs while it samples holds the GIL, of the time it could
run (a wait for a CPU on a busy machine is not the GIL's).

The share's arithmetic is tested on scripted windows, the sampler's bookkeeping on a scripted
clock; the tests that run real loading beside it compare kinds of loading far apart (Python
that never lets go of the GIL, sleeping that never holds it), and skip where the machine
keeps the sampler waiting for a CPU (what it observes there is the scheduler's)."""

from __future__ import annotations

import itertools
import select
import threading
import time

import pytest

from flowloader._iter.gil import (
    MIN_SAMPLED_S,
    GilSampler,
    Window,
    _total,
    held_share,
    thread_times,
)


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


# The tests that run real loading beside the sampler tell kinds of loading apart only where
# the machine leaves the sampler a CPU: past this share of its time waiting for one, what it
# observes is the scheduler's, and they skip (the arithmetic above is what a busy machine is
# tested by).
BUSY_WAIT_SHARE = 0.2


def sampled(work, seconds: float = 0.2, then=None) -> float | None:
    """The share read over a batch of ``work``, and as many batches of ``then`` (default:
    the same work) as it takes to observe enough (a busy machine leaves the sampler little
    time of its own)."""
    sampler = GilSampler()
    try:
        sampler.sample(True)
        work(seconds)
        sampler.sample(False)
        while sampler.wanted:
            sampler.sample(True)
            (then or work)(0.05)
            sampler.sample(False)
        total = _total(sampler._windows)
        if total.queued_s > BUSY_WAIT_SHARE * total.wall_s:
            pytest.skip(
                f"the machine kept the sampler waiting for a CPU "
                f"{100 * total.queued_s / total.wall_s:.0f}% of the time"
            )
        return sampler.held_fraction()
    finally:
        sampler.stop()


# -- the arithmetic, on scripted windows ----------------------------------------------------


def test_a_wait_for_a_cpu_is_not_the_gil_s() -> None:
    # 10 ms windows: 3 ms on a CPU, 7 ms waiting for one: starved, not held
    starved = [Window(0.003, 0.007, 0.01)] * 16
    assert held_share(starved, 0.04) == pytest.approx(0.0)
    # measured against wall time, as before, it read 70% held
    assert held_share([w._replace(queued_s=0.0) for w in starved], 0.04) == pytest.approx(0.7)
    # 2 ms on a CPU, 5 ms waiting for one, 3 ms for the GIL: 3 of the 5 it could run
    assert held_share([Window(0.002, 0.005, 0.01)] * 10, 0.04) == pytest.approx(0.6)
    assert held_share([Window(0.0, 0.0, 0.01)] * 4, 0.04) == pytest.approx(1.0)
    # never could run: nothing observed, however long
    assert held_share([Window(0.0, 0.01, 0.01)] * 100, 0.04) is None


def test_a_wait_that_spans_two_windows_counts_in_their_sum() -> None:
    """The kernel adds a wait for a CPU when it ends: a window ends mid-wait and shows none
    (looking held), the next shows it all (more than its own time)."""
    ended = Window(0.002, 0.016, 0.01)  # 2 ms on a CPU, 8 waiting and 8 of the last one
    cut = Window(0.002, 0.0, 0.01)  # 2 ms on a CPU, 8 waiting, still to be counted
    assert held_share([ended, cut] * 12, 0.04) == pytest.approx(0.0)
    assert cut.held_s == pytest.approx(0.008)  # each alone: wrong
    assert ended.held_s == 0.0


def test_the_gil_held_counts_no_more_than_the_cpu_time_the_loading_got() -> None:
    # sleeping loading on a starved machine: it takes the GIL for 1 ms of Python a window,
    # then waits 6 ms for a CPU holding it; the sampler waits 7 ms for the GIL, runs 3
    preempted = [Window(0.003, 0.0, 0.01, loading_cpu_s=0.001)] * 10
    assert held_share(preempted, 0.03) == pytest.approx(0.25)  # 1 of the 4 observed
    # Python loading that got a CPU all its time holds the GIL all of it
    assert held_share([Window(0.0, 0.0, 0.01, 0.01)] * 4, 0.04) == pytest.approx(1.0)


def test_the_share_is_read_from_the_newest_windows_and_needs_enough_of_them() -> None:
    newest_first = [Window(0.01, 0.0, 0.01)] * 4 + [Window(0.0, 0.0, 0.01)] * 4
    assert held_share(newest_first, 0.04) == pytest.approx(0.0)
    assert held_share(newest_first, 0.08) == pytest.approx(0.5)
    assert held_share(newest_first, 0.09) is None
    assert held_share([], 0.01) is None


def test_the_thread_s_times_come_from_the_kernel() -> None:
    cpu, queued = thread_times()
    assert cpu > 0
    assert queued >= 0
    assert thread_times(threading.current_thread())[0] > 0  # a thread given
    ended = threading.Thread(target=lambda: None)
    ended.start()
    ended.join()
    assert thread_times(ended) == (0.0, 0.0)  # a thread gone: nothing known


# -- the sampler's bookkeeping, on a scripted clock -----------------------------------------


@pytest.mark.timeout(30)
def test_each_window_counts_what_the_clock_says_between_its_ends() -> None:
    calls = {"flowloader-gil-sampler": itertools.count(), "loading": itertools.count()}
    loading = threading.current_thread()
    readers = set()

    def clock(thread: threading.Thread) -> tuple[float, float]:
        """Each window (two reads): the sampler 2 ms on a CPU and 1 ms waiting for one, the
        loading 3 ms on a CPU."""
        readers.add(threading.current_thread().name)
        if thread is loading:
            return 0.003 * next(calls["loading"]), 0.0
        k = next(calls[thread.name])
        return 0.002 * k, 0.001 * k

    sampler = GilSampler(clock=clock)
    try:
        sampler.sample(True)
        time.sleep(3 * MIN_SAMPLED_S)
        sampler.sample(False)
        windows = list(sampler._windows)
    finally:
        sampler.stop()
    assert windows
    for window in windows:
        assert window.cpu_s == pytest.approx(0.002)
        assert window.queued_s == pytest.approx(0.001)
        assert window.loading_cpu_s == pytest.approx(0.003)
        assert window.held_s <= 0.003 + 1e-12  # what the loading's CPU time allows
    # the first from sample(True)'s reading (the sampler may get the GIL only later)
    assert readers == {threading.current_thread().name, "flowloader-gil-sampler"}


@pytest.mark.timeout(30)
def test_nothing_is_sampled_while_sampling_is_off_and_stop_ends_the_thread() -> None:
    sampler = GilSampler()
    spin(0.05)
    assert sampler.held_fraction() is None  # never switched on
    sampler.stop()
    deadline = time.monotonic() + 5
    while any(t.name == "flowloader-gil-sampler" for t in threading.enumerate()):
        assert time.monotonic() < deadline
        time.sleep(0.01)


@pytest.mark.timeout(30)
def test_a_batch_shorter_than_the_minimum_tells_nothing_yet() -> None:
    sampler = GilSampler()
    try:
        sampler.sample(True)
        sampler.sample(False)  # over at once
        assert sampler.wanted
        assert sampler.held_fraction() is None
        while sampler.wanted:  # the next batches add to it
            sampler.sample(True)
            time.sleep(MIN_SAMPLED_S)
            sampler.sample(False)
        assert sampler.held_fraction() is not None
    finally:
        sampler.stop()


@pytest.mark.timeout(30)
def test_a_batch_over_before_sampling_was_due_is_not_sampled() -> None:
    """The epoch's first batch is sampled from 10 ms in: cheap loading (MNIST's 2 ms) is
    not sampled at all."""
    sampler = GilSampler()
    try:
        sampler.sample(True, after_s=3600.0)
        sampler.sample(False)
        assert sampler.sampled_s == 0.0
        assert sampler.held_fraction() is None
        while sampler.wanted:  # one due at once is sampled
            sampler.sample(True, after_s=0.0)
            time.sleep(MIN_SAMPLED_S)
            sampler.sample(False)
        assert sampler.sampled_s >= MIN_SAMPLED_S
    finally:
        sampler.stop()


# -- real loading beside it -----------------------------------------------------------------


@pytest.mark.timeout(30)
def test_python_holds_the_gil_and_sleeping_does_not() -> None:
    assert sampled(spin) > 0.7
    assert sampled(time.sleep) < 0.3


def start_up_then(loading):
    def batch(seconds: float) -> None:
        spin(0.04)  # the first batch's start-up: Python, holding the GIL
        loading(seconds)

    return batch


@pytest.mark.timeout(30)
def test_the_share_is_read_from_the_end_of_the_batch_after_its_start_up() -> None:
    assert sampled(start_up_then(time.sleep), 0.1, then=time.sleep) < 0.3
    assert sampled(start_up_then(spin), 0.1, then=spin) > 0.7


def python_with_short_drops(seconds: float) -> None:
    """Python work that lets go of the GIL for a moment every ~20 us (a system call)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sum(range(500))
        select.select([], [], [], 0)


@pytest.mark.timeout(30)
def test_loading_that_drops_the_gil_often_still_reads_as_holding_it() -> None:
    # A sampler that spun in Python would keep the GIL 5 ms at each drop and read this as
    # mostly free (under 10%); it reads about half or more, as a second thread worker
    # would find it.
    assert sampled(python_with_short_drops) > 0.3
