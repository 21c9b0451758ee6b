"""Shared fixtures and markers."""

from __future__ import annotations

import importlib.util

import pytest

HAS_TORCH = importlib.util.find_spec("torch") is not None

# Scripts that test_torchrun.py and test_ported_examples.py launch: not test modules, and
# they import torch at the top, so --doctest-modules must not import them (torch is optional).
collect_ignore_glob = ["integration/torchrun_*.py", "integration/ported_*.py"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_torch = pytest.mark.skip(reason="torch is not installed")
    for item in items:
        if "torch" in item.keywords and not HAS_TORCH:
            item.add_marker(skip_torch)
        # (a pytestmark in a conftest.py marks nothing: pytest reads it from test modules)
        if "integration" in item.path.parts:
            item.add_marker(pytest.mark.multiprocess)
