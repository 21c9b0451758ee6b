"""worker_method="ray"'s arguments are checked at construction, without a cluster (and
without Ray: the core never imports it)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest

import flowloader as fl


class Tiny(fl.Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> np.int64:
        return np.int64(i)


@pytest.fixture
def ray_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Construction only asks whether Ray is importable; pretend it is."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: object() if name == "ray" else real(name, *args),
    )


@pytest.mark.usefixtures("ray_installed")
def test_ray_options_may_not_ask_ray_to_retry() -> None:
    for key in ("max_restarts", "max_task_retries", "max_retries"):
        with pytest.raises(ValueError, match=f"may not set {key}.*max_worker_restarts"):
            fl.DataLoader(Tiny(), num_workers=2, worker_method="ray", ray_options={key: 2})
    with pytest.raises(ValueError, match="may not set max_retries"):
        fl.DataLoader(Tiny(), num_workers=2, worker_method="ray", ray_options={"max_retries": 0})
    for key, value in [("max_concurrency", 4), ("lifetime", "detached"), ("name", "w")]:
        with pytest.raises(ValueError, match=f"may not set {key}: each worker is one actor"):
            fl.DataLoader(Tiny(), num_workers=2, worker_method="ray", ray_options={key: value})
    with pytest.raises(TypeError, match="dict of Ray actor options"):
        fl.DataLoader(Tiny(), num_workers=2, worker_method="ray", ray_options=["num_cpus"])
    loader = fl.DataLoader(
        Tiny(), num_workers=2, worker_method="ray", ray_options={"num_cpus": 2, "max_restarts": 0}
    )
    assert loader.ray_options == {"num_cpus": 2, "max_restarts": 0}
    assert loader.worker_method == "ray"


@pytest.mark.usefixtures("ray_installed")
def test_ray_workers_refuse_a_multiprocessing_context() -> None:
    with pytest.raises(ValueError, match="with worker_method='ray'"):
        fl.DataLoader(Tiny(), num_workers=2, worker_method="ray", multiprocessing_context="fork")


def test_ray_options_need_ray_workers() -> None:
    with pytest.raises(ValueError, match="ray_options only applies to worker_method='ray'"):
        fl.DataLoader(Tiny(), num_workers=2, ray_options={"num_cpus": 1})


def test_without_ray_installed_the_error_says_how_to_install_it(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "ray" else real(name, *args),
    )
    with pytest.raises(ImportError, match=r"pip install 'flowloader\[ray\]'"):
        fl.DataLoader(Tiny(), num_workers=2, worker_method="ray")


def test_import_does_not_load_ray() -> None:
    code = (
        "import sys, flowloader, flowloader.vision, flowloader.text; sys.exit('ray' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
