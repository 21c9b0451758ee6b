"""The GIL sampler: how much of what runs while it samples holds the GIL."""

from __future__ import annotations

import select
import threading
import time

import pytest

from flowloader._iter.gil import MIN_SAMPLED_S, GilSampler


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def sampled(work, seconds: float = 0.2) -> float | None:
    sampler = GilSampler()
    try:
        sampler.sample(True)
        work(seconds)
        sampler.sample(False)
        return sampler.held_fraction()
    finally:
        sampler.stop()


@pytest.mark.timeout(30)
def test_python_holds_the_gil_and_sleeping_does_not() -> None:
    assert sampled(spin) > 0.7
    assert sampled(time.sleep) < 0.3


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


def start_up_then(loading):
    def batch(seconds: float) -> None:
        spin(0.04)  # the first batch's start-up: Python, holding the GIL
        loading(seconds)

    return batch


@pytest.mark.timeout(30)
def test_the_share_is_read_from_the_end_of_the_batch_after_its_start_up() -> None:
    assert sampled(start_up_then(time.sleep), 0.1) < 0.3
    assert sampled(start_up_then(spin), 0.1) > 0.7


@pytest.mark.timeout(30)
def test_a_batch_shorter_than_the_minimum_tells_nothing_yet() -> None:
    sampler = GilSampler()
    try:
        sampler.sample(True)
        time.sleep(MIN_SAMPLED_S / 4)
        sampler.sample(False)
        assert sampler.wanted
        assert sampler.held_fraction() is None
        sampler.sample(True)  # the next batch adds to it
        time.sleep(MIN_SAMPLED_S)
        sampler.sample(False)
        assert not sampler.wanted
        assert sampler.held_fraction() < 0.3
    finally:
        sampler.stop()


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


@pytest.mark.timeout(30)
def test_the_sampler_hardly_slows_gil_free_loading() -> None:
    sampler = GilSampler()
    try:
        sampler.sample(True)
        started = time.perf_counter()
        time.sleep(0.05)
        sampler.sample(False)
        assert time.perf_counter() - started < 0.06
        assert sampler.held_fraction() < 0.2
    finally:
        sampler.stop()


@pytest.mark.timeout(30)
def test_a_batch_over_before_sampling_was_due_is_not_sampled_and_not_held_up() -> None:
    """The epoch's first batch is sampled from 10 ms in: cheap loading (MNIST's 2 ms) is
    neither slowed by the sampler nor kept waiting for it to count."""
    sampler = GilSampler()
    try:
        sampler.sample(True, after_s=0.05)
        spin(0.002)
        stopped = time.perf_counter()
        sampler.sample(False)
        assert time.perf_counter() - stopped < 0.05  # not the 0.1 s wait for a count
        assert sampler.sampled_s == 0.0
        assert sampler.held_fraction() is None
        sampler.sample(True, after_s=0.02)  # a longer one is sampled after its start
        time.sleep(0.02 + MIN_SAMPLED_S)
        sampler.sample(False)
        assert MIN_SAMPLED_S * 0.9 <= sampler.sampled_s < MIN_SAMPLED_S + 0.015
        assert sampler.held_fraction() < 0.3
    finally:
        sampler.stop()
