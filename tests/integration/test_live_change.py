"""A live change of workers is not a resume (review wave 5: N1, F7, F8, F9).

num_workers="auto" and a given memory_budget move an epoch onto other workers while it runs.
The epoch carries on (Epoch.move_to): the sampler's remaining order, the skip account and the
user's generators are never rewound, and with skip_errors a run of batches whose every
sample fails never ends an epoch early, whatever the workers.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest

import flowloader as fl
import flowloader.dataloader as dataloader_module
from flowloader.errors import TooManySkippedError
from tests.integration.test_autotune import Scripted

METHODS = ["multiprocessing", "thread"]


class Rows(fl.Dataset):
    """Row i is i, except rows in ``bad``, which raise OSError."""

    def __init__(self, n: int = 400, bad: range | set[int] = range(0)) -> None:
        self.n, self.bad = n, bad

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> np.int64:
        if i in self.bad:
            raise OSError(f"corrupt row {i}")
        return np.int64(i)


def batches(loader: fl.DataLoader) -> list[list[int]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [b.tolist() for b in loader]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_runs_of_all_skipped_batches_never_end_an_epoch(method, workers) -> None:
    """Bad rows [40, 240): 25 batches in a row with no good sample, more than the batches in
    flight; every good row still arrives, in num_workers=0's batches."""
    ds = Rows(bad=range(40, 240))
    options = {"batch_size": 8, "skip_errors": OSError}
    expected = batches(fl.DataLoader(ds, **options))
    assert sum(len(b) for b in expected) == 200
    got = batches(fl.DataLoader(ds, num_workers=workers, worker_method=method, **options))
    assert got == expected


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", METHODS)
def test_skipped_batches_count_in_the_position(method) -> None:
    """A state taken after a run of all-skipped batches resumes after them."""
    ds = Rows(n=96, bad=range(16, 64))
    options = {"batch_size": 8, "skip_errors": OSError}
    expected = batches(fl.DataLoader(ds, **options))
    loader = fl.DataLoader(ds, num_workers=2, worker_method=method, **options)
    got = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for batch in loader:
            got.append(batch.tolist())
            if len(got) == 3:  # rows 0-7, 8-15, then 64-71 after six skipped batches
                break
    state = loader.state_dict()
    assert state["batches_yielded"] == 9
    again = fl.DataLoader(ds, **options)
    again.load_state_dict(state)
    assert got + batches(again) == expected


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", METHODS)
def test_auto_with_in_order_false_changes_workers_mid_epoch(monkeypatch, method) -> None:
    """in_order=False needs no position for a live change: 0, 2, 1, 3 workers in one epoch
    deliver every sample once."""
    monkeypatch.setattr(dataloader_module, "WorkerTuner", Scripted({2: 2, 7: 1, 12: 3}))
    loader = fl.DataLoader(
        Rows(n=160),
        batch_size=4,
        shuffle=True,
        num_workers="auto",
        worker_method=method,
        in_order=False,
    )
    iterator = iter(loader)
    got = batches(iterator)  # type: ignore[arg-type]
    assert sorted(i for b in got for i in b) == list(range(160))
    assert [c["num_workers"] for c in iterator.stats().tuning] == [2, 1, 3]


class EveryFourthIsSlow(Rows):
    """The first sample of every batch of 4 takes 20 ms: with in_order=False, batches come
    out of order while there are workers."""

    def __getitem__(self, i: int) -> np.ndarray:
        if i % 4 == 0:
            time.sleep(0.02)
        return super().__getitem__(i)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("taken", [5, 6, 7, 8])
def test_in_order_false_after_a_change_to_no_workers_is_refused_until_a_prefix(
    monkeypatch, method, taken
) -> None:
    """With in_order=False, "auto" going from 2 workers to none mid-epoch: the batches the
    workers delivered out of order are not a prefix until those still loading come, so a
    state is refused until then (it was accepted, and lost and repeated a batch), and
    resumes exactly once accepted."""
    monkeypatch.setattr(dataloader_module, "WorkerTuner", Scripted({1: 2, 5: 0}))
    ds = EveryFourthIsSlow(n=64)
    loader = fl.DataLoader(
        ds, batch_size=4, num_workers="auto", worker_method=method, in_order=False
    )
    iterator = iter(loader)
    got = [next(iterator).tolist() for _ in range(taken)]
    try:
        state = loader.state_dict()
    except ValueError as error:
        assert "not a prefix" in str(error)  # noqa: PT017
        state = None
    if state is not None:
        again = fl.DataLoader(ds, batch_size=4)
        again.load_state_dict(state)
        got += batches(again)
        assert sorted(i for b in got for i in b) == list(range(64))
    del iterator


@pytest.mark.timeout(120)
@pytest.mark.parametrize("method", METHODS)
def test_a_live_change_leaves_the_global_generator_alone(monkeypatch, method) -> None:
    """generator=None shuffles with NumPy's global generator; the loop's own draws from it
    during the epoch are never replayed by a change of workers, and the batches are those of
    num_workers=0 seeded alike."""
    np.random.seed(1234)
    expected = batches(fl.DataLoader(Rows(n=120), batch_size=2, shuffle=True))
    monkeypatch.setattr(dataloader_module, "WorkerTuner", Scripted({3: 2, 20: 1, 40: 0}))
    np.random.seed(1234)
    loader = fl.DataLoader(
        Rows(n=120), batch_size=2, shuffle=True, num_workers="auto", worker_method=method
    )
    got, draws = [], []
    for batch in loader:
        got.append(batch.tolist())
        draws.append(np.random.random())  # the loop's augmentation, dropout, ...
    assert got == expected
    assert len(set(draws)) == len(draws) == 60


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "options",
    [
        {"num_workers": "auto"},
        {"num_workers": 2, "worker_method": "thread", "memory_budget": 1 << 30},
        {"num_workers": 2, "memory_budget": 1 << 30},
    ],
    ids=["auto", "budget-threads", "budget-processes"],
)
def test_max_skipped_counts_across_a_change_of_workers(monkeypatch, options) -> None:
    """Two bad samples in batch 0 and one in batch 3: max_skipped=2 ends the epoch at batch 3
    with num_workers=0, and so after a change of workers between them."""
    monkeypatch.setattr(dataloader_module, "WorkerTuner", Scripted({1: 2}))
    ds = Rows(n=40, bad={1, 2, 13})
    loader = fl.DataLoader(ds, batch_size=4, skip_errors=OSError, max_skipped=2, **options)
    got: list[list[int]] = []

    def read_all() -> None:
        for batch in loader:
            got.append(batch.tolist())

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(TooManySkippedError) as raised:
            read_all()
    assert got == [[0, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert [s.index for s in raised.value.skipped] == [1, 2, 13]


@pytest.mark.timeout(120)
def test_stats_count_each_skip_once_across_changes(monkeypatch) -> None:
    monkeypatch.setattr(dataloader_module, "WorkerTuner", Scripted({2: 2, 5: 1}))
    loader = fl.DataLoader(
        Rows(n=40, bad={1, 13, 30}), batch_size=4, skip_errors=OSError, num_workers="auto"
    )
    iterator = iter(loader)
    assert sum(len(b) for b in batches(iterator)) == 37  # type: ignore[arg-type]
    assert [s.index for s in iterator.stats().skipped] == [1, 13, 30]
