"""max_worker_restarts: a worker process killed mid-epoch (SIGKILL, as the OOM killer does) is
replaced, its batches in flight are loaded again, and every sample still comes exactly once
and in sampler order; past the limit the crash error stands. The leak guard (conftest.py)
checks that no process, segment or descriptor of a dead worker is left behind."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

import flowloader as fl
from flowloader.errors import WorkerCrashedError

from .datasets import Arrays


class DiesOnce(fl.Dataset):
    """Sample i is i; loading a sample in ``deaths`` kills its worker with SIGKILL, the first
    time only (a marker file in ``directory`` remembers it across processes)."""

    def __init__(self, directory: str, deaths: tuple[int, ...], n: int = 48) -> None:
        self.directory, self.deaths, self.n = directory, deaths, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if i in self.deaths:
            try:
                os.close(os.open(os.path.join(self.directory, str(i)), os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                pass
            else:
                os.kill(os.getpid(), signal.SIGKILL)
        return np.int64(i)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("persistent", [False, True])
def test_workers_killed_while_loading_are_replaced_and_nothing_is_lost(
    tmp_path, persistent
) -> None:
    deaths = (5, 13, 14, 30)  # worker 1, worker 1 again, then both of them
    loader = fl.DataLoader(
        DiesOnce(str(tmp_path), deaths),
        batch_size=4,
        num_workers=2,
        max_worker_restarts=4,
        persistent_workers=persistent,
    )
    iterator = iter(loader)
    with pytest.warns(RuntimeWarning) as warned:
        samples = np.concatenate(list(iterator)).tolist()
    assert samples == list(range(48))
    assert iterator.stats().worker_restarts == 4
    messages = [str(w.message) for w in warned if "restarting it" in str(w.message)]
    assert len(messages) == 4
    assert "DataLoader worker 1 (pid " in messages[0]
    assert "killed by signal SIGKILL" in messages[0]
    assert "[4, 5, 6, 7]" in messages[0]
    if persistent:  # the replacements serve the next epoch
        assert np.concatenate(list(loader)).tolist() == list(range(48))
        loader._iterator.shutdown()


def take_killing_workers(iterator, at: tuple[int, ...]) -> list:
    """Every batch's labels; after batch k in ``at``, SIGKILL worker k % 2 (from outside)."""
    labels = []
    for k, batch in enumerate(iterator):
        labels.append(batch["label"].tolist())
        if k in at:
            os.kill(iterator._transport.group.processes[k % 2].pid, signal.SIGKILL)
    return labels


@pytest.mark.timeout(90)
@pytest.mark.parametrize("persistent", [False, True])
def test_workers_killed_from_outside_every_epoch_are_replaced(persistent) -> None:
    def loader(**workers):
        return fl.DataLoader(Arrays(40), batch_size=4, shuffle=True, generator=3, **workers)

    reference = loader()
    expected = [[b["label"].tolist() for b in reference] for _ in range(2)]
    killing = loader(num_workers=2, max_worker_restarts=4, persistent_workers=persistent)
    for epoch in range(2):
        iterator = iter(killing)
        with pytest.warns(RuntimeWarning, match="restarting it"):
            labels = take_killing_workers(iterator, at=(1, 5))
        assert labels == expected[epoch]
        # (a death noticed only after an epoch's last batch arrived counts in the next one)
        assert iterator.stats().worker_restarts >= 1
    if persistent:
        killing._iterator.shutdown()


def collect(loader, into: list | None = None) -> list:
    """The samples, appended to ``into`` as they come (kept if loading raises)."""
    into = [] if into is None else into
    for batch in loader:
        into.extend(batch.tolist())
    return into


@pytest.mark.timeout(60)
def test_past_the_limit_the_crash_error_stands(tmp_path) -> None:
    loader = fl.DataLoader(
        DiesOnce(str(tmp_path), (5, 21)), batch_size=4, num_workers=2, max_worker_restarts=1
    )
    delivered: list = []
    with (
        pytest.warns(RuntimeWarning, match="restarting it"),
        pytest.raises(WorkerCrashedError, match="max_worker_restarts=1 were used"),
    ):
        collect(loader, into=delivered)
    assert delivered == list(range(20))  # everything before the second death's batch


def test_max_worker_restarts_is_checked() -> None:
    with pytest.raises(ValueError, match="only applies to loading with workers"):
        fl.DataLoader(Arrays(), max_worker_restarts=1)
    with pytest.raises(ValueError, match="non-negative"):
        fl.DataLoader(Arrays(), num_workers=1, max_worker_restarts=-1)
    with pytest.raises(TypeError, match="should be an int"):
        fl.DataLoader(Arrays(), num_workers=1, max_worker_restarts=1.5)
