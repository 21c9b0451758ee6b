"""memory_budget: the loader's own memory (workers' USS, batches in shared memory) measured as
the kernel counts it and kept within the budget: fewer batches in flight with one warning
for explicit settings, fewer workers for num_workers="auto", a clear error before any worker
starts when one batch cannot fit; batches stay num_workers=0's throughout."""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
import pytest

import flowloader as fl
from flowloader import resources
from flowloader._iter import memory
from flowloader.errors import MemoryBudgetError

MB = 1 << 20


class Megabytes(fl.Dataset):
    """Item i: ``mb`` MB filled with i % 251, after ``delay_s`` of sleep."""

    def __init__(self, n: int = 48, mb: int = 1, delay_s: float = 0.0) -> None:
        self.n, self.mb, self.delay_s = n, mb, delay_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> np.ndarray:
        if self.delay_s:
            time.sleep(self.delay_s)
        return np.full(self.mb * MB, i % 251, dtype=np.uint8)


def firsts(loader: fl.DataLoader) -> list[list[int]]:
    return [batch[:, 0].tolist() for batch in loader]


def read(loader: fl.DataLoader, follow: str) -> tuple[list[list[int]], list[int], Any]:
    """The batches' first items, ``stats().<follow>`` after each batch, and the iterator."""
    iterator = iter(loader)
    got, followed = [], []
    for batch in iterator:
        got.append(batch[:, 0].tolist())
        followed.append(getattr(iterator.stats(), follow))
    return got, followed, iterator


class Touch:
    """worker_init_fn that leaves a file behind: proof that a worker started."""

    def __init__(self, path) -> None:
        self.path = path

    def __call__(self, worker_id: int) -> None:
        self.path.write_text("started")


class Hog:
    """worker_init_fn that makes each worker hold ``mb`` MB of its own (written) memory."""

    def __init__(self, mb: int) -> None:
        self.mb = mb

    def __call__(self, worker_id: int) -> None:
        Hog.held = np.ones(self.mb * MB, dtype=np.uint8)


@pytest.fixture
def measure_every_batch(monkeypatch) -> None:
    monkeypatch.setattr(memory, "CHECK_EVERY_S", 0.0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [2, "auto"])
def test_a_budget_too_small_for_one_batch_fails_before_any_worker_starts(tmp_path, workers) -> None:
    touched = tmp_path / "worker-started"
    loader = fl.DataLoader(
        Megabytes(delay_s=0.002),
        batch_size=4,
        num_workers=workers,
        memory_budget=3 * MB,
        worker_init_fn=Touch(touched),
    )
    with pytest.raises(MemoryBudgetError, match=r"memory_budget=3\.0 MB cannot hold one batch"):
        list(loader)
    assert not touched.exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("method", ["multiprocessing", "thread"])
def test_a_tight_budget_keeps_fewer_batches_in_flight_with_one_warning(
    measure_every_batch, method
) -> None:
    ds = Megabytes(mb=8)
    expected = firsts(fl.DataLoader(ds, batch_size=4, shuffle=True, generator=5))
    loader = fl.DataLoader(
        ds,
        batch_size=4,
        shuffle=True,
        generator=5,
        num_workers=2,
        prefetch_factor=4,
        worker_method=method,
        # 32 MB batches; a worker process holds some 10-50 MB of its own: 4 batches at most
        # in flight besides the one the loop holds, rather than 8.
        memory_budget=200 * MB,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got, in_flight, iterator = read(loader, "in_flight")
    assert got == expected
    said = [str(w.message) for w in caught if "memory_budget" in str(w.message)]
    assert len(said) == 1, said
    assert "instead of 8 (prefetch_factor=4 x num_workers=2)" in said[0]
    report = iterator.stats().memory
    # Before the workers run, their memory is not known: (200 - 32) // 32 = 5 batches; once
    # measured (two processes hold 20 MB or more), fewer, once those already sent drain.
    assert max(in_flight) <= 5
    if method == "multiprocessing":
        assert max(in_flight[5:]) <= 4
    assert report["budget"] == 200 * MB
    assert report["batch_bytes"] == 32 * MB
    assert report["measurements"] == len(expected)
    if method == "multiprocessing":
        assert report["workers_bytes"] > 0  # measured from the workers' smaps


@pytest.mark.timeout(120)
def test_auto_starts_no_more_workers_than_the_budget_holds(measure_every_batch) -> None:
    """Loading worth two workers, but a budget for one worker and two 32 MB batches at
    most (two workers need three batches)."""
    ds = Megabytes(n=48, mb=8, delay_s=0.004)
    expected = firsts(fl.DataLoader(ds, batch_size=4))
    loader = fl.DataLoader(ds, batch_size=4, num_workers="auto", memory_budget=95 * MB)
    got, workers, _ = read(loader, "num_workers")
    assert got == expected
    assert max(workers) <= 1


@pytest.mark.timeout(120)
def test_auto_removes_a_worker_when_the_workers_memory_grows(measure_every_batch) -> None:
    """Workers that each hold 200 MB of their own (and some 20-70 MB a worker holds anyway),
    in a 300 MB budget: measured, the tuner goes down to the one that fits, mid-epoch,
    without changing a batch."""
    ds = Megabytes(n=96, delay_s=0.004)
    expected = firsts(fl.DataLoader(ds, batch_size=4))
    loader = fl.DataLoader(
        ds,
        batch_size=4,
        num_workers="auto",
        worker_method="multiprocessing",  # threads would share one process's memory
        memory_budget=300 * MB,
        worker_init_fn=Hog(200),
    )
    got, workers, iterator = read(loader, "num_workers")
    assert got == expected
    stats = iterator.stats()
    reasons = [change["reason"] for change in stats.tuning]
    assert stats.tuning[0]["num_workers"] == 2, reasons  # chosen before they were measured
    assert "memory_budget allows 1 workers" in reasons
    assert workers[-1] == 1
    assert stats.memory["workers_bytes"] >= 200 * MB


def test_the_budget_argument() -> None:
    ds = Megabytes(n=4)
    machine = resources.memory_limit()
    assert fl.DataLoader(ds)._memory_budget == machine // 2
    assert fl.DataLoader(ds, memory_budget=0.25)._memory_budget == int(0.25 * machine)
    assert fl.DataLoader(ds, memory_budget=2 << 30)._memory_budget == 2 << 30
    assert fl.DataLoader(ds, memory_budget=0.25).memory_budget == 0.25  # as given
    for wrong in ("1GB", True, None.__class__):
        with pytest.raises(TypeError, match="memory_budget should be a number of bytes"):
            fl.DataLoader(ds, memory_budget=wrong)
    for wrong in (0, -5, 0.0, -0.5, float("nan")):
        with pytest.raises(ValueError, match="memory_budget should be above 0"):
            fl.DataLoader(ds, memory_budget=wrong)


@pytest.mark.timeout(60)
def test_a_state_saved_after_the_first_measured_batch_resumes_exactly() -> None:
    """A given budget loads the first batch in process, then starts the workers: the
    loader's state_dict follows the epoch onto them."""
    ds = Megabytes(n=32)

    def make() -> fl.DataLoader:
        return fl.DataLoader(
            ds, batch_size=4, shuffle=True, generator=3, num_workers=2, memory_budget=1 << 30
        )

    expected = firsts(fl.DataLoader(ds, batch_size=4, shuffle=True, generator=3))
    loader = make()
    iterator = iter(loader)
    got = [next(iterator)[:, 0].tolist() for _ in range(3)]
    state = loader.state_dict()
    assert state["batches_yielded"] == 3
    del iterator
    resumed = make()
    resumed.load_state_dict(state)
    assert got + firsts(resumed) == expected
