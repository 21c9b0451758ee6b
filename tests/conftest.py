"""Shared fixtures and markers."""

from __future__ import annotations

import importlib.util
from collections.abc import Generator

import pytest

from . import leak_guard

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
# The Ray transport's cluster tests need Ray (the ray-test extra); without it, nothing to run.
if importlib.util.find_spec("ray") is None:
    collect_ignore_glob.append("ray_cluster/*")


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
    if "integration" not in request.node.path.parts:
        leak_guard.check_nothing_left(request.node.nodeid, leak_guard.workers_and_segments)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> Generator[None]:
    """Last in pytest's report, above its counts: how many tests skipped for a missing
    optional package, and the pip install that brings them (tests/skip_summary.py); the tests
    whose workers only the garbage collector stopped (tests/leak_guard.py)."""
    from . import skip_summary

    result = yield
    skip_summary.write(terminalreporter)
    leak_guard.write_summary(terminalreporter)
    return result
