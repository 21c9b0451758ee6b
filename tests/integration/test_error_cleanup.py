"""A worker's error that leaves the ``for`` loop stops the loader's workers at once, without
waiting for the garbage collector, and a loader's finalizer never acts in a forked child.

Every test here runs with the cyclic collector off: what they check must hold by reference
counting alone, as it does for a user whose program happens not to collect for a while.
"""

from __future__ import annotations

import gc
import multiprocessing
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import flowloader as fl
from flowloader._ipc import shm

GRACE_S = 5.0  # far above the loader's own stop grace, for a loaded 2-core machine


class FailsAt(fl.Dataset):
    """Sample ``bad`` raises in whatever worker loads it."""

    def __init__(self, n: int = 64, bad: int = 20) -> None:
        self.n, self.bad = n, bad

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if i == self.bad:
            raise ValueError(f"sample {i} is corrupt")
        return i


@pytest.fixture
def no_collector():
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def live_workers() -> tuple[list, list, list]:
    """(worker processes, worker threads, segments) of this process, as they are now."""
    processes = [p for p in multiprocessing.active_children() if p.name.startswith("flowloader")]
    threads = [t for t in threading.enumerate() if t.name.startswith("flowloader-worker")]
    return processes, threads, shm.list_segments(shm.process_prefix())


def left_after(grace_s: float) -> tuple[list, list, list]:
    """What is still alive after ``grace_s``, looking without ever calling the collector."""
    deadline = time.monotonic() + grace_s
    while any(left := live_workers()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def run_until_the_error(worker_method: str, catch_as: bool) -> str:
    """Iterate until the worker's error leaves the loop; caught ``as error`` or bare."""
    loader = fl.DataLoader(FailsAt(), batch_size=4, num_workers=2, worker_method=worker_method)
    if catch_as:
        try:
            for _ in loader:
                pass
        except ValueError as error:
            return str(error)
    else:
        try:
            for _ in loader:
                pass
        except ValueError:
            return "sample 20 is corrupt"
    return "no error"


@pytest.mark.usefixtures("no_collector")
@pytest.mark.parametrize("worker_method", ["multiprocessing", "thread"])
@pytest.mark.parametrize("catch_as", [True, False])
def test_a_worker_error_that_leaves_the_loop_stops_the_workers(
    worker_method: str, catch_as: bool
) -> None:
    assert "sample 20 is corrupt" in run_until_the_error(worker_method, catch_as)
    processes, threads, segments = left_after(GRACE_S)
    assert not processes, f"worker processes outlived the error: {processes}"
    assert not threads, f"worker threads outlived the error: {threads}"
    assert not segments, f"segments outlived the error: {segments}"


SCRIPT = """
import gc
import flowloader as fl

class FailsAt(fl.Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        if i == 20:
            raise ValueError("corrupt")
        return i

def collect_in_worker(worker_id):
    gc.collect()  # whatever garbage the fork inherited is collected here, in the child

gc.disable()
{setup}
batches = fl.DataLoader(
    list(range(16)), batch_size=4, num_workers=2, worker_init_fn=collect_in_worker
)
print(sum(len(b) for b in batches))
"""

AFTER_AN_ERROR = """
try:
    for _ in fl.DataLoader(FailsAt(), batch_size=4, num_workers=2):
        pass
except ValueError:
    pass
"""

# A cycle of the user's making: only the collector can free this iterator, and in a forked
# child it finds it among the garbage the child inherited.
IN_A_CYCLE = """
iterator = iter(fl.DataLoader(list(range(16)), batch_size=4, num_workers=2))
next(iterator)
iterator.cycle = iterator
del iterator
"""


@pytest.mark.parametrize("setup", [AFTER_AN_ERROR, IN_A_CYCLE], ids=["after-error", "cycle"])
def test_the_next_loader_s_workers_collecting_inherited_garbage_print_nothing(
    setup: str,
) -> None:
    script = textwrap.dedent(SCRIPT).format(setup=setup)
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "16"
    assert run.stderr == ""
