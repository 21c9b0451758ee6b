"""The examples run, and the resume example really continues where the checkpoint was."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "examples")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, "resume_training.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.timeout(180)
def test_resume_example_matches_an_uninterrupted_run(tmp_path) -> None:
    checkpoint = str(tmp_path / "ckpt.json")
    crashed = run("--checkpoint", checkpoint)
    assert crashed.returncode == 1
    assert "crashing at step 25" in crashed.stdout
    resumed = run("--checkpoint", checkpoint, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    # The uninterrupted run: no crash, same seeds.
    whole = run("--checkpoint", str(tmp_path / "other.json"), "--crash-at", "0")
    assert whole.returncode == 0, whole.stderr
    assert json.loads(resumed.stdout.splitlines()[-1]) == json.loads(whole.stdout.splitlines()[-1])


def run_example(tmp_path, *args: str, torchrun: bool = False) -> subprocess.CompletedProcess:
    command = [sys.executable]
    if torchrun:
        command += ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    return subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


@pytest.mark.timeout(300)
def test_numpy_example(tmp_path) -> None:
    done = run_example(tmp_path, os.path.join(EXAMPLES, "numpy_train.py"), "--short")
    assert done.returncode == 0, done.stderr[-2000:]
    accuracy = float(done.stdout.split("test accuracy")[-1])
    assert accuracy > 0.4  # chance is 0.1: it learns


@pytest.mark.torch
@pytest.mark.timeout(300)
def test_mnist_example(tmp_path) -> None:
    pytest.importorskip("torch")
    done = run_example(tmp_path, os.path.join(EXAMPLES, "mnist_train.py"), "--short")
    assert done.returncode == 0, done.stderr[-2000:]
    assert float(done.stdout.split("test accuracy")[-1]) > 0.8


@pytest.mark.torch
@pytest.mark.slow  # a torchrun job of 2 ranks (about 10 s): once, in CI's slow stage
@pytest.mark.timeout(300)
def test_imagenet_example_under_torchrun(tmp_path) -> None:
    pytest.importorskip("torch")
    done = run_example(
        tmp_path, os.path.join(EXAMPLES, "imagenet_train.py"), "--short", torchrun=True
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "done: 4 batches per rank, 2 ranks" in done.stdout
