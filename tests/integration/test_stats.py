"""iterator.stats(): per-stage time, in-flight batches, busy and wait fractions."""

from __future__ import annotations

import time

import numpy as np
import pytest

import flowloader as fl
from flowloader import stats


class Slow(fl.Dataset):
    """1 ms of "reading" and 1 ms of marked transform per sample."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int):
        time.sleep(0.001)
        with stats.stage("transform"):
            time.sleep(0.001)
        return np.full(4, i, np.float32)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_stats_add_up(num_workers) -> None:
    iterator = iter(fl.DataLoader(Slow(), batch_size=8, num_workers=num_workers))
    for _ in iterator:
        pass
    s = iterator.stats()
    assert s.batches == 8
    assert s.stage_s["read"] >= 0.064 * 0.9
    assert s.stage_s["transform"] >= 0.064 * 0.9
    assert s.stage_s["collate"] > 0
    assert 0 < s.data_wait_fraction <= 1
    assert 0 < s.worker_busy_fraction <= 1.05
    assert s.first_batch_s is not None
    assert s.cores_used > 0
    assert s.num_workers == num_workers
    if num_workers:
        assert s.stage_s["transport"] > 0
        assert 0 < s.mean_in_flight <= 2 * num_workers
    assert set(s.as_dict()) >= {"stage_s", "data_wait_fraction", "input_bound"}


def test_a_slow_consumer_is_not_input_bound() -> None:
    # 32 steps of 50 ms: the wait for the workers' start-up (50-100 ms on a loaded machine)
    # stays well under a tenth of the run.
    iterator = iter(fl.DataLoader(Slow(), batch_size=2, num_workers=2, prefetch_factor=4))
    for _ in iterator:
        time.sleep(0.05)  # the training step is much slower than loading
    s = iterator.stats()
    assert not s.input_bound
    assert s.verdict().startswith("not input-bound")


def test_a_fast_consumer_is_input_bound() -> None:
    iterator = iter(fl.DataLoader(Slow(), batch_size=8))
    for _ in iterator:
        pass
    s = iterator.stats()
    assert s.input_bound
    assert "num_workers > 0" in s.verdict()


def test_disabled_stats_record_nothing(monkeypatch) -> None:
    monkeypatch.setattr(stats, "enabled", False)
    iterator = iter(fl.DataLoader(Slow(), batch_size=8))
    for _ in iterator:
        pass
    assert iterator.stats().batches == 0


class Burn(fl.Dataset):
    """Each sample burns about 10 ms of CPU."""

    def __len__(self) -> int:
        return 40

    def __getitem__(self, i: int):
        end = time.process_time() + 0.01
        while time.process_time() < end:
            pass
        return np.float32(i)


class ShrinkingSampler(fl.Sampler):
    """40 indices in the first epoch, 2 afterwards."""

    def __init__(self) -> None:
        self.epochs = 0

    def __iter__(self):
        self.epochs += 1
        return iter(range(40 if self.epochs == 1 else 2))

    def __len__(self) -> int:
        return 40 if self.epochs == 0 else 2


def test_persistent_workers_count_cpu_per_epoch() -> None:
    loader = fl.DataLoader(
        Burn(), batch_size=1, sampler=ShrinkingSampler(), num_workers=2, persistent_workers=True
    )
    iterator = iter(loader)
    for _ in iterator:
        pass
    assert iterator.stats().worker_cpu_s > 0.3  # 40 samples of 10 ms each
    iterator = iter(loader)  # the second epoch, on the same workers
    for _ in iterator:
        pass
    second = iterator.stats()
    # The first epoch's CPU must not be counted again. CPU time, not wall time: about 0.02 s
    # (2 samples), however busy the machine, and more than 0.3 s with the first's in it.
    assert second.worker_cpu_s < 0.3
    assert second.cores_used <= 3
    del iterator, loader
