"""Shared fixtures and markers."""

from __future__ import annotations

import gc
import importlib.util
import multiprocessing
import time

import pytest

from flowloader._ipc import shm

HAS_TORCH = importlib.util.find_spec("torch") is not None

# Scripts that test_torchrun.py, test_ported_examples.py and test_frameworks.py launch: not
# test modules, and they import torch at the top, so --doctest-modules must not import them
# (torch is optional). The drop-in's torch modules are skipped likewise (pyproject.toml).
collect_ignore_glob = [
    "integration/torchrun_*.py",
    "integration/ported_*.py",
    "integration/lightning_*.py",
    "integration/accelerate_*.py",
    "integration/framework_*.py",
]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_torch = pytest.mark.skip(reason="torch is not installed")
    for item in items:
        if "torch" in item.keywords and not HAS_TORCH:
            item.add_marker(skip_torch)
        # (a pytestmark in a conftest.py marks nothing: pytest reads it from test modules)
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.multiprocess)


@pytest.fixture(autouse=True)
def no_worker_left(request: pytest.FixtureRequest):
    """Every test outside tests/integration/ (whose conftest.py also counts descriptors) may
    start workers too: none of them, and none of their /dev/shm segments, may outlive it."""
    yield
    if "integration" in request.node.path.parts:
        return
    deadline = time.monotonic() + 5
    while True:
        children = [p for p in multiprocessing.active_children() if p.name.startswith("flowloader")]
        segments = shm.list_segments(shm.process_prefix())
        if not (children or segments) or time.monotonic() > deadline:
            break
        gc.collect()  # an exception kept by the test (pytest.raises) keeps its iterator
        time.sleep(0.05)
    assert not children, f"worker processes left running: {children}"
    assert not segments, f"shared-memory segments left in {shm.shm_dir()}: {segments}"
