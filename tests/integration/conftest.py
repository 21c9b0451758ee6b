"""Fixtures for tests that start real worker processes: every test must leave no child
process, no /dev/shm segment of this process and no extra file descriptor behind."""

from __future__ import annotations

import gc
import multiprocessing
import os
import time

import pytest

from flowloader._ipc import shm


def open_fds() -> set[int]:
    return (
        {int(fd) for fd in os.listdir("/proc/self/fd")} if os.path.isdir("/proc/self/fd") else set()
    )


def multiprocessing_singleton_fds() -> set[int]:
    """Descriptors of the process-wide helpers that spawn and forkserver start once and keep
    (the resource tracker and the fork server): multiprocessing's, not a loader's."""
    from multiprocessing import forkserver, resource_tracker

    candidates = [
        getattr(resource_tracker._resource_tracker, "_fd", None),
        getattr(forkserver._forkserver, "_forkserver_alive_fd", None),
    ]
    return {fd for fd in candidates if isinstance(fd, int)}


def leftovers(fds_before: set[int]) -> tuple[list, list, set]:
    gc.collect()
    children = [p for p in multiprocessing.active_children() if p.name.startswith("flowloader")]
    segments = shm.list_segments(shm.process_prefix())
    fds = open_fds() - fds_before - multiprocessing_singleton_fds()
    return children, segments, fds


@pytest.fixture(autouse=True)
def no_leaks():
    """Fail a test that leaves workers, shared-memory segments or descriptors behind."""
    gc.collect()
    before = open_fds()
    yield
    deadline = time.monotonic() + 5
    while True:
        children, segments, fds = leftovers(before)
        if not (children or segments or fds) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not children, f"worker processes left running: {children}"
    assert not segments, f"shared-memory segments left in {shm.shm_dir()}: {segments}"
    assert not fds, f"file descriptors left open: {sorted(fds)}"
