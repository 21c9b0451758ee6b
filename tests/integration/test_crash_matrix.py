"""The crash matrix: however a worker fails, every batch before the first one it lost comes
out first, in sampler order (other workers' included), then the documented error, and nothing
is left behind. A few runs of each in the default suite; 200 of each under ``-m slow``."""

from __future__ import annotations

import random
import re
import time

import pytest

import flowloader as fl
from flowloader._ipc import shm
from flowloader.errors import WorkerCrashedError

from .loader_datasets import CrashAt, failing_init_in_worker_0

# Batches of 2 over 2 workers: worker 0 loads batches 0, 2, 4...; worker 1 batches 1, 3...
# Batch 2 (samples 4, 5) fails in worker 0 while worker 1 still loads batch 1 (slow samples 2,
# 3), and batch 0, finished by worker 0, may still be in its pipe when worker 0 goes.
BAD, SLOW = 4, (2, 3)
# how -> (the error, what its message says, the batches delivered before it)
MATRIX = {
    "exception": (ValueError, "cannot decode sample 4", [0, 1]),
    "base-exception": (WorkerCrashedError, "exit code 1", [0, 1]),
    "sys.exit": (WorkerCrashedError, "exit code 3", [0, 1]),
    "os._exit": (WorkerCrashedError, "exit code 7", [0, 1]),
    "sigkill": (WorkerCrashedError, "signal SIGKILL", [0, 1]),
    "segfault": (WorkerCrashedError, "signal SIGSEGV", [0, 1]),
    "worker_init_fn": (RuntimeError, "init failed in 0", []),
}


def run_once(how: str) -> None:
    init = failing_init_in_worker_0 if how == "worker_init_fn" else None
    dataset = CrashAt("none" if init else how, BAD, SLOW)
    loader = fl.DataLoader(dataset, batch_size=2, num_workers=2, worker_init_fn=init)
    error_type, message, before = MATRIX[how]
    iterator = iter(loader)
    time.sleep(random.uniform(0, 0.08))  # let the crash happen before or while we read
    delivered, raised = [], None
    try:
        for batch in iterator:
            delivered.append(int(batch[0]) // 2)
    except Exception as error:
        raised = error
    error = f"{type(raised).__name__}: {raised}"
    assert isinstance(raised, error_type), error
    assert not isinstance(raised, OSError), error
    assert re.search(message, error), (how, error)
    assert delivered == before, (how, delivered)
    if error_type is WorkerCrashedError:
        assert "DataLoader worker 0 (pid " in error
        assert "[4, 5]" in error  # the batch it held
    del iterator, raised  # and nothing else: no reference cycle may keep the workers
    assert shm.list_segments(shm.process_prefix()) == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", MATRIX)
def test_crash_matrix(how) -> None:
    for _ in range(3):
        run_once(how)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("how", MATRIX)
def test_crash_matrix_200_times(how) -> None:
    for _ in range(200):
        run_once(how)
