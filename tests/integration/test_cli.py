"""The `flowloader` command: help, exit codes, one-line errors, the JSON schema, sample data."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from flowloader.cli import sample_data
from flowloader.vision import datasets, image_backend

RECORD_KEYS = {
    "library": str,
    "pipeline": str,
    "dataset": str,
    "num_workers": int,
    "batch_size": int,
    "batches": int,
    "samples": int,
    "seconds": float,
    "samples_per_s": float,
    "batches_per_s": float,
    "mb_per_s": float,
    "first_batch_s": float,
    "cores_used": float,
    "stage_ms_per_batch": dict,
    "data_wait_fraction": float,
    "worker_busy_fraction": float,
    "verdict": str,
}


def flowloader(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flowloader", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def tiny_images(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("images"))
    datasets.make_image_folder(root, num_classes=2, images_per_class=6, size=(64, 48))
    return root


@pytest.fixture(scope="module")
def tiny_mnist(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("mnist"))
    datasets.make_mnist(root, train_size=256, test_size=16)
    return root


def test_help_and_version() -> None:
    done = flowloader()
    assert done.returncode == 0
    assert "bench" in done.stdout
    assert "make-dataset" in done.stdout
    version = flowloader("--version")
    assert version.returncode == 0
    assert version.stdout.startswith("flowloader ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bench", "--workers", "x"], "--workers"),
        (["bench", "--workers", "-1"], "non-negative"),
        (["bench", "--pipeline", "resnet"], "unknown pipeline"),
        (["bench", "--batch-size", "0"], "positive"),
        (["bench", "--seconds", "1", "--epochs", "1"], "not allowed with"),
        (["bench", "/no/such/dir"], "no such directory"),
        (["bench", "--compare", "tensorflow"], "invalid choice"),
        (["make-dataset", "cifar", "x"], "invalid choice"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_options_and_paths_give_one_line_and_exit_2(args, message) -> None:
    done = flowloader(*args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert message in lines[0]
    assert "Traceback" not in done.stderr


def test_pipeline_that_does_not_fit_the_data(tiny_mnist) -> None:
    done = flowloader("bench", tiny_mnist, "--pipeline", "imagenet-val")
    assert done.returncode == 2
    assert "does not fit" in done.stderr


def check_records(stdout: str) -> list[dict]:
    records = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    for record in records:
        for key, kind in RECORD_KEYS.items():
            assert isinstance(record[key], kind), (key, record[key])
        assert set(record["stage_ms_per_batch"]) == {
            "read",
            "transform",
            "collate",
            "transport",
            "wait",
        }
        assert 0.0 <= record["data_wait_fraction"] <= 1.0
        assert record["samples"] > 0
    return records


@pytest.mark.timeout(120)
def test_bench_on_a_tiny_image_folder(tiny_images) -> None:
    done = flowloader(
        "bench", tiny_images, "--epochs", "1", "--workers", "0,1", "--batch-size", "4", "--json"
    )
    assert done.returncode == 0, done.stderr
    records = check_records(done.stdout)
    assert [(r["pipeline"], r["num_workers"]) for r in records] == [
        ("imagenet-train", 0),
        ("imagenet-train", 1),
        ("imagenet-val", 0),
        ("imagenet-val", 1),
    ]
    assert all(r["samples"] == 12 for r in records)
    assert records[0]["stage_ms_per_batch"]["transform"] > 0
    assert {r["image_backend"] for r in records} == {image_backend()}


@pytest.mark.timeout(120)
def test_bench_table_on_tiny_mnist(tiny_mnist) -> None:
    done = flowloader("bench", tiny_mnist, "--seconds", "0.5", "--workers", "0,2")
    assert done.returncode == 0, done.stderr
    assert "samples/s" in done.stdout
    assert "mnist: fastest at num_workers=" in done.stdout
    assert f"JPEG decoding: {image_backend()}" in done.stdout


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is not None, reason="matplotlib present")
def test_plot_without_matplotlib_is_a_clear_error(tiny_mnist, tmp_path) -> None:
    done = flowloader("bench", tiny_mnist, "--plot", str(tmp_path / "x.png"))
    assert done.returncode == 2
    assert "pip install matplotlib" in done.stderr


def test_compare_without_torchvision_is_a_clear_error(tiny_mnist) -> None:
    if importlib.util.find_spec("torchvision") is not None:
        pytest.skip("torchvision present")
    done = flowloader("bench", tiny_mnist, "--compare", "torch")
    assert done.returncode == 2
    assert "torchvision" in done.stderr


@pytest.mark.parametrize("kind", ["imagenet-like", "mnist"])
def test_make_dataset(kind, tmp_path) -> None:
    done = flowloader("make-dataset", kind, str(tmp_path / kind), "--images", "40")
    assert done.returncode == 0, done.stderr
    if kind == "mnist":
        assert len(datasets.MNIST(str(tmp_path / kind))) == 40
    else:
        assert len(datasets.ImageFolder(str(tmp_path / kind))) == 40


def test_builtin_sample_data_is_made_once_and_cached(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FLOWLOADER_CACHE", str(tmp_path))
    monkeypatch.setitem(sample_data.MNIST_SIZES, "train_size", 64)
    root = sample_data.builtin("mnist")
    assert root == str(tmp_path / "mnist")
    stamp = os.path.getmtime(os.path.join(root, "MNIST", "raw", "train-images-idx3-ubyte"))
    assert sample_data.builtin("mnist") == root
    assert os.path.getmtime(os.path.join(root, "MNIST", "raw", "train-images-idx3-ubyte")) == stamp
    assert not os.path.exists(root + ".partial")
