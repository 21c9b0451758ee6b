"""Every way an epoch can end leaves no worker, no segment and no descriptor behind (the
autouse fixture in conftest.py checks that after each test), within a bounded time."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time

import pytest

import flowloader as fl
from flowloader._ipc import shm

from .loader_datasets import Arrays


def loader(**kwargs) -> fl.DataLoader:
    return fl.DataLoader(Arrays(40), batch_size=4, num_workers=2, **kwargs)


def test_exhaustion() -> None:
    assert sum(1 for _ in loader()) == 10


def test_break_early() -> None:
    for i, _ in enumerate(loader()):
        if i == 2:
            breaking = time.monotonic()
            break
    # The workers stop at once (milliseconds), not after the stop grace (2 s) that workers
    # deaf to Stop would sit out: timed from the break, so a slow start on a busy machine
    # does not count.
    assert time.monotonic() - breaking < 2


def test_delete_iterator_mid_epoch() -> None:
    iterator = iter(loader())
    next(iterator)
    del iterator


def test_iterator_in_a_reference_cycle_is_collected() -> None:
    iterator = iter(loader())
    next(iterator)
    holder: dict = {"iterator": iterator}
    holder["self"] = holder
    del iterator, holder
    gc.collect()


def train(step) -> None:
    for batch in loader():
        step(batch)


def test_exception_in_the_training_loop() -> None:
    def step(batch):
        raise ZeroDivisionError("loss exploded")

    with pytest.raises(ZeroDivisionError):
        train(step)


def test_keyboard_interrupt_in_the_training_loop() -> None:
    def step(batch):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)

    with pytest.raises(KeyboardInterrupt):
        train(step)


def test_batches_kept_by_the_consumer_stay_valid_after_shutdown() -> None:
    kept = list(loader())
    assert [int(b["label"][0]) for b in kept] == list(range(0, 40, 4))
    assert float(kept[3]["image"][1, 0, 0, 0]) == 13.0
    # The segments are already gone from /dev/shm; the memory lives until `kept` goes.
    assert shm.list_segments(shm.process_prefix()) == []


def test_persistent_workers_are_reused_across_epochs() -> None:
    persistent = loader(persistent_workers=True, shuffle=True, generator=0)
    pids = []
    for _ in range(3):
        labels = sorted(int(i) for b in persistent for i in b["label"])
        assert labels == list(range(40))
        pids.append([p.pid for p in persistent._iterator._transport.group.processes])
    assert pids[0] == pids[1] == pids[2]
    del persistent


def test_persistent_workers_after_an_early_break() -> None:
    persistent = loader(persistent_workers=True)
    for i, _ in enumerate(persistent):
        if i == 1:
            break
    assert sum(len(b["label"]) for b in persistent) == 40
    del persistent


def test_persistent_workers_restart_iterable_streams() -> None:
    from .loader_datasets import Stream

    persistent = fl.DataLoader(Stream(10), batch_size=3, num_workers=2, persistent_workers=True)
    for _ in range(2):
        assert sorted(int(v) for b in persistent for v in b) == list(range(10))
    del persistent


MAIN_SCRIPT = f"""
import os, sys, time
sys.path.insert(0, {os.path.dirname(os.path.dirname(__file__))!r})
import flowloader as fl
from integration.loader_datasets import Arrays
it = iter(fl.DataLoader(Arrays(100000, delay_s=0.01), batch_size=2, num_workers=2,
                        prefetch_factor=4))
held = [next(it) for _ in range(5)]  # batches held, more in flight
print(os.getpid(), " ".join(str(p.pid) for p in it._transport.group.processes), flush=True)
if sys.argv[1] == "exit":
    os._exit(0)
for batch in it:  # mid-epoch until killed
    held.append(batch)
    time.sleep(0.01)
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["exit", "sigkill", "sigterm", "sigterm-group"])
def test_workers_clean_up_when_the_main_process_dies(how) -> None:
    main = subprocess.Popen(
        [sys.executable, "-c", MAIN_SCRIPT, how],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, for the scheduler-style SIGTERM
    )
    try:
        main_pid, *pids = (int(p) for p in main.stdout.readline().split())
        assert len(pids) == 2, main.stderr.read()
        time.sleep(0.2)  # mid-epoch
        if how == "sigkill":
            os.kill(main_pid, signal.SIGKILL)
        elif how == "sigterm":
            os.kill(main_pid, signal.SIGTERM)
        elif how == "sigterm-group":
            os.killpg(main_pid, signal.SIGTERM)
        main.wait(10)
        deadline = time.monotonic() + 5
        ours = shm.process_prefix(main_pid)
        while time.monotonic() < deadline and (
            any(_alive(p) for p in pids) or shm.list_segments(ours)
        ):
            time.sleep(0.05)
        assert not [p for p in pids if _alive(p)], "workers outlived the main process by 5 s"
        assert shm.list_segments(ours) == [], "segments left in /dev/shm"
    finally:
        if main.poll() is None:
            main.kill()
        main.communicate()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False
