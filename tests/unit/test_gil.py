"""The GIL sampler: how much of what runs while it samples holds the GIL."""

from __future__ import annotations

import threading
import time

import pytest

from flowloader._iter.gil import GilSampler


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
