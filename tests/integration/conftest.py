"""Fixtures for tests that start real worker processes: every test must leave no child
process, no /dev/shm segment of this process and no extra file descriptor behind."""

from __future__ import annotations

import gc
import os
from typing import Any

import pytest

from .. import leak_guard


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


def leftovers(fds_before: set[int]) -> dict[str, Any]:
    found = leak_guard.workers_and_segments()
    found["file descriptors left open"] = sorted(
        open_fds() - fds_before - multiprocessing_singleton_fds()
    )
    return found


@pytest.fixture(autouse=True)
def no_leaks(request: pytest.FixtureRequest):
    """Fail a test that leaves workers, shared-memory segments or descriptors behind."""
    gc.collect()
    before = open_fds()
    yield
    leak_guard.check_nothing_left(request.node.nodeid, lambda: leftovers(before))
