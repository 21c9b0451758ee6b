"""LanceDataset's tests (lance_cases.py), in a pytest process of their own: pylance, once
imported, hooks every later fork of the process with a warning, and the suite's tests that
turn warnings into errors must not meet it."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest


@pytest.mark.skipif(
    importlib.util.find_spec("lance") is None or importlib.util.find_spec("pyarrow") is None,
    reason="needs pyarrow and pylance (pip install 'flowloader[lance]')",
)
def test_lance_cases_in_their_own_process() -> None:
    cases = os.path.join(os.path.dirname(__file__), "lance_cases.py")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", cases],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in done.stdout.splitlines()[-1], done.stdout[-2000:]


def test_the_suite_process_has_not_loaded_pylance() -> None:
    """Nothing the suite imports or runs in its own process may load pylance (its fork
    hook warns at every later fork); lance_cases.py imports it only in its fixtures."""
    assert "lance" not in sys.modules
