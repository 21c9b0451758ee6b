"""A worker that dies, whatever the way, surfaces within about a second as an error that names
it, its pid, how it died and the batches it held; a hung worker hits the timeout."""

from __future__ import annotations

import time

import pytest

import flowloader as fl
from flowloader.errors import LoaderTimeoutError, WorkerCrashedError

from .loader_datasets import Failing

CRASHES = {
    "base-exception": "exit code 1",
    "sys.exit": "exit code 3",
    "os._exit": "exit code 7",
    "sigkill": "signal SIGKILL",
    "segfault": "signal SIGSEGV",
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", CRASHES)
def test_worker_death_is_reported_quickly(how) -> None:
    loader = fl.DataLoader(Failing(how, bad=5), batch_size=4, num_workers=2)
    started = time.monotonic()
    with pytest.raises(WorkerCrashedError) as caught:
        for _ in loader:
            pass
    # About 0.1 s here: 10 s leaves room for a busy machine, and still fails a death noticed
    # late (one never noticed hits the 30 s test timeout).
    assert time.monotonic() - started < 10
    message = str(caught.value)
    assert "DataLoader worker 1 (pid " in message
    assert CRASHES[how] in message
    assert "[4, 5, 6, 7]" in message


@pytest.mark.timeout(30)
def test_iterator_is_finished_after_a_crash_and_the_loader_can_start_again() -> None:
    loader = fl.DataLoader(Failing("os._exit", bad=1), batch_size=2, num_workers=1)
    iterator = iter(loader)
    with pytest.raises(WorkerCrashedError):
        next(iterator)
    with pytest.raises(StopIteration):
        next(iterator)


@pytest.mark.timeout(30)
def test_timeout_names_pending_indices() -> None:
    loader = fl.DataLoader(Failing("hang", bad=2), batch_size=2, num_workers=2, timeout=0.5)
    iterator = iter(loader)
    assert next(iterator).tolist() == [0, 1]
    started = time.monotonic()
    with pytest.raises(LoaderTimeoutError, match=r"0.5 seconds.*\[2, 3\]"):
        next(iterator)
    # 0.5 s, with room for a busy machine; the read itself would hang for 60 s.
    assert time.monotonic() - started < 10
    assert isinstance(LoaderTimeoutError("x"), RuntimeError)
