"""max_worker_restarts: a worker process killed mid-epoch (SIGKILL, as the OOM killer does) is
replaced, its batches in flight are loaded again, and every sample still comes exactly once
and in sampler order; past the limit the crash error stands. The leak guard (conftest.py)
checks that no process, segment or descriptor of a dead worker is left behind."""

from __future__ import annotations

import os
import signal
import warnings

import numpy as np
import pytest

import flowloader as fl
from flowloader._iter.lifecycle import WorkerGroup
from flowloader.errors import WorkerCrashedError

from .loader_datasets import Arrays


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
    with pytest.warns(RuntimeWarning, match="restarting it") as warned:
        epochs = [take_killing_workers(iter(killing), at=(1, 5)) for _ in range(2)]
    assert epochs == expected
    # A kill is a restart where the worker still had batches to load. On a busy machine a
    # worker may have loaded all of its batches before the loop killed it (the loop is
    # slow, the epoch short): then nothing is lost and nothing restarted in that epoch, or
    # the death is noticed at the next one's start. Each restart is warned once.
    assert 1 <= sum("restarting it" in str(w.message) for w in warned) <= 4
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


def mapped_segments(prefix: str) -> set[str]:
    """The names of this process's memory mappings of segments starting with ``prefix``."""
    with open("/proc/self/maps") as maps:
        return {
            os.path.basename(line.split()[-1])
            if line.split()[-1] != "(deleted)"
            else os.path.basename(line.split()[-2])
            for line in maps
            if prefix in line
        }


def open_fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def descriptors_held_after_one_epoch(tmp_path, deaths: tuple[int, ...]):
    """(descriptors the loader holds after an epoch, its iterator) with persistent workers."""
    tmp_path.mkdir()
    before = open_fd_count()
    loader = fl.DataLoader(
        DiesOnce(str(tmp_path), deaths, n=48),
        batch_size=4,
        num_workers=2,
        max_worker_restarts=3,
        persistent_workers=True,
    )
    iterator = iter(loader)
    assert np.concatenate(list(iterator)).tolist() == list(range(48))
    return open_fd_count() - before, iterator


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc/self/maps")
@pytest.mark.timeout(90)
def test_a_restart_releases_the_dead_worker_s_mappings_and_descriptors_at_once(tmp_path) -> None:
    """With persistent workers the loader lives on: what a dead worker cost this process
    (its segments' mappings, its pipes, its process) must go with it, not at shutdown."""
    held_without_deaths, calm = descriptors_held_after_one_epoch(tmp_path / "calm", ())
    calm.shutdown()
    with pytest.warns(RuntimeWarning, match="restarting it"):
        # samples 13, 29 and 45 are in batches 3, 7 and 11: worker 1's, three times
        held, iterator = descriptors_held_after_one_epoch(tmp_path / "deaths", (13, 29, 45))
    group = iterator._transport.group
    assert group._starts[1] == 3
    assert held == held_without_deaths
    for start in range(3):
        prefix = f"{group.prefix}w1s{start}_"
        assert not mapped_segments(prefix), f"a dead worker's segments are still mapped: {prefix}"
    iterator.shutdown()


@pytest.mark.timeout(60)
def test_a_replacement_that_cannot_start_ends_the_epoch_with_the_crash(
    tmp_path, monkeypatch
) -> None:
    loader = fl.DataLoader(
        DiesOnce(str(tmp_path), (5,)), batch_size=4, num_workers=2, max_worker_restarts=2
    )
    iterator = iter(loader)  # both workers started; from now on, starting one fails

    def fork_fails(self, worker_id: int) -> None:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(WorkerGroup, "_start_worker", fork_fails)
    delivered: list = []
    with pytest.raises(WorkerCrashedError, match="Starting a new worker failed") as caught:
        collect(iterator, into=delivered)
    assert isinstance(caught.value.__cause__, BlockingIOError)
    assert delivered == [0, 1, 2, 3]  # everything before the dead worker's first batch


@pytest.mark.timeout(60)
def test_a_restart_warning_raised_as_an_error_loses_no_batch(tmp_path) -> None:
    loader = fl.DataLoader(
        DiesOnce(str(tmp_path), (5,)), batch_size=4, num_workers=2, max_worker_restarts=1
    )
    iterator = iter(loader)
    delivered: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # (once the JAX tests have run, JAX warns at every fork: the restart forks)
        warnings.filterwarnings("ignore", r"os\.fork\(\) was called", RuntimeWarning)
        with pytest.raises(RuntimeWarning, match="restarting it") as caught:
            collect(iterator, into=delivered)
        collect(iterator, into=delivered)
    assert delivered == list(range(48))
    assert "worker 1" in str(caught.value)


def test_a_restart_warning_points_at_the_user_s_line(tmp_path) -> None:
    loader = fl.DataLoader(
        DiesOnce(str(tmp_path), (5,)), batch_size=4, num_workers=2, max_worker_restarts=1
    )
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        for _ in loader:
            pass
    [restart] = [w for w in warned if "restarting it" in str(w.message)]
    assert restart.filename == __file__
