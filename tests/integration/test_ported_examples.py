"""pytorch/examples' MNIST and ImageNet data loading, ported by renaming modules only, run to
their final report lines on small generated data (our own copies of the scripts' data-loading
parts; a tiny model stands in for torchvision.models)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from flowloader.vision.datasets import make_image_folder, make_mnist

pytestmark = pytest.mark.torch
HERE = os.path.dirname(__file__)


def run_script(name: str, *args: str, cwd) -> str:
    done = subprocess.run(
        [sys.executable, os.path.join(HERE, name), *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=cwd,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.timeout(300)
@pytest.mark.parametrize("workers", [0, 1])
def test_ported_mnist_example_reaches_its_test_line(tmp_path, workers) -> None:
    pytest.importorskip("torch")
    make_mnist(str(tmp_path / "data"), train_size=1280, test_size=500)
    out = run_script("ported_mnist.py", "data", "--workers", str(workers), cwd=tmp_path)
    match = re.search(r"Test set: Average loss: ([\d.]+), Accuracy: (\d+)/500 \((\d+)%\)", out)
    assert match, out
    assert int(match.group(2)) > 100  # chance is 50 of 500: it learned from real tensors


@pytest.mark.timeout(300)
# distributed: a torchrun job of 2 ranks, once in CI's slow stage
@pytest.mark.parametrize("distributed", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_ported_imagenet_example_reaches_its_accuracy_line(tmp_path, distributed) -> None:
    pytest.importorskip("torch")
    make_image_folder(str(tmp_path / "train"), num_classes=3, images_per_class=12, size=(320, 240))
    make_image_folder(str(tmp_path / "val"), num_classes=3, images_per_class=5, size=(320, 240))
    args = [str(tmp_path), "--workers", "2", "-b", "8"] + (["--distributed"] if distributed else [])
    out = run_script("ported_imagenet.py", *args, cwd=tmp_path)
    assert "Epoch: [0][5/5]" in out
    assert re.search(r" \* Acc@1 [\d.]+ Acc@5 [\d.]+", out), out
