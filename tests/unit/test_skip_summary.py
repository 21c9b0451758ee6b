"""The end-of-run summary of tests skipped for a missing optional package (tests/conftest.py)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from tests import skip_summary

REPO = pathlib.Path(__file__).resolve().parents[2]
OPTIONAL = {"torch": ["torch"], "s3fs": ["shards-test", "s3"], "jax": ["jax"]}


def test_the_extras_come_from_the_package_metadata_test_extras_first() -> None:
    optional = skip_summary.optional_packages()
    assert optional["s3fs"] == ["shards-test", "s3"]
    assert optional["moto"] == ["shards-test"]
    assert optional["torch"] == ["torch"]
    assert optional["lightning"] == ["frameworks-test"]


def test_the_reasons_the_suite_gives_for_a_missing_package_are_grouped_by_install() -> None:
    reasons = [
        "Skipped: could not import 'torch': No module named 'torch'",
        "could not import 'torchvision.datasets.cifar': No module named 'torchvision'",
        "torch is not installed",  # tests/conftest.py, for the torch marker
        "needs torch",
        "needs jax",
        "could not import 's3fs': No module named 's3fs'",
        "needs CUDA",  # not a package
        "matplotlib present",  # a package present
        "native kernel: the native kernel is switched off (FLOWLOADER_NATIVE=0)",
    ]
    assert skip_summary.summary(reasons, OPTIONAL) == [
        "6 skipped for a missing optional package; to run them:",
        '  pip install -e ".[torch]"           3  (torch)',
        '  pip install -e ".[jax]"             1  (jax)',
        '  pip install -e ".[shards-test]"     1  (s3fs)',
        "  pip install torchvision             1  (torchvision)",
    ]
    assert skip_summary.summary(["needs CUDA"], OPTIONAL) == []


def test_a_run_ends_with_the_summary(tmp_path) -> None:
    """A real pytest run, with tests/conftest.py's hook, over tests that skip."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_terminal_summary\n")
    (tmp_path / "test_skips.py").write_text(
        "import pytest\n\n"
        "def test_importorskip():\n"
        "    pytest.importorskip('flowloader_absent_package')\n\n"
        "@pytest.mark.skipif(True, reason='needs jax')\n"
        "def test_marked():\n"
        "    pass\n\n"
        "@pytest.mark.skipif(True, reason='needs CUDA')\n"
        "def test_other():\n"
        "    pass\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    tail = done.stdout.splitlines()
    start = next(i for i, line in enumerate(tail) if "missing optional packages" in line)
    assert tail[start + 1 : start + 4] == [
        "2 skipped for a missing optional package; to run them:",
        '  pip install -e ".[jax]"                   1  (jax)',
        "  pip install flowloader_absent_package     1  (flowloader_absent_package)",
    ]


def test_the_ray_tests_skip_is_counted() -> None:
    """tests/ray_cluster skips as a whole, with the install command in its reason."""
    optional = {**OPTIONAL, "ray": ["ray-test", "ray"]}
    reason = "Skipped: Ray is not installed (pip install 'flowloader[ray]')"
    assert skip_summary.summary([reason], optional) == [
        "1 skipped for a missing optional package; to run them:",
        '  pip install -e ".[ray-test]"     1  (Ray)',
    ]
