"""The drop-in inside the training frameworks, on 2 CPU ranks (gloo): Lightning's DDP and
Accelerate's ``prepare`` treat it as torch's DataLoader (they check ``isinstance`` against
torch's class), so each splits the data between the ranks, and mid-epoch resume is exact."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.slow]

from .framework_data import SAMPLES  # noqa: E402  (imports torch)

HERE = os.path.dirname(__file__)


def run(command: list[str], cwd: str) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env, cwd=cwd)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]


def ranks(out_dir: str, mode: str) -> list[dict]:
    found = []
    for rank in range(2):
        with open(os.path.join(out_dir, f"{mode}-rank{rank}.json")) as f:
            found.append(json.load(f))
    return found


def check_split(full: list[dict], padded: bool) -> None:
    """Per epoch: the two ranks get as many batches, and together the whole dataset, each
    sample on one rank only (Accelerate pads the last batch with repeats, as torch's)."""
    for epoch in ("0", "1"):
        per_rank = [[i for batch in r["seen"][epoch] for i in batch] for r in full]
        assert len(full[0]["seen"][epoch]) == len(full[1]["seen"][epoch])
        assert set(per_rank[0]) | set(per_rank[1]) == set(range(SAMPLES))
        if padded:  # only the padding of the last batches repeats samples
            extra = collections.Counter(per_rank[0] + per_rank[1]) - collections.Counter(
                range(SAMPLES)
            )
            assert sum(extra.values()) == len(per_rank[0]) * 2 - SAMPLES < 8
        else:
            assert [len(s) for s in per_rank] == [SAMPLES // 2] * 2
            assert not set(per_rank[0]) & set(per_rank[1])
    assert full[0]["seen"]["0"] != full[0]["seen"]["1"]  # a new order each epoch


@pytest.mark.timeout(300)
def test_lightning_ddp_splits_the_drop_in_loader_and_resumes_it(tmp_path) -> None:
    pytest.importorskip("lightning")
    script = os.path.join(HERE, "lightning_ddp.py")
    run([sys.executable, script, str(tmp_path), "full"], cwd=str(tmp_path))
    full = ranks(str(tmp_path), "full")
    check_split(full, padded=False)
    # Exactly as with torch's own loader: Lightning's sampler (seed 0) deals the same samples.
    run([sys.executable, script, str(tmp_path), "torch"], cwd=str(tmp_path))
    for ours, torchs in zip(full, ranks(str(tmp_path), "torch"), strict=True):
        assert ours["seen"] == torchs["seen"]
    # Continue from the checkpoint Lightning took after 3 training steps of epoch 0.
    checkpoint = str(tmp_path / "epoch=0-step=3.ckpt")
    run([sys.executable, script, str(tmp_path), "resume", checkpoint], cwd=str(tmp_path))
    for before, after in zip(full, ranks(str(tmp_path), "resume"), strict=True):
        assert after["seen"]["0"] == before["seen"]["0"][3:]
        assert after["seen"]["1"] == before["seen"]["1"]  # the next epoch too
        assert before["loader"] == after["loader"] == "DataLoader"


@pytest.mark.timeout(300)
def test_accelerate_prepare_splits_the_drop_in_loader_into_tensors(tmp_path) -> None:
    pytest.importorskip("accelerate")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc_per_node=2", os.path.join(HERE, "accelerate_ranks.py"), str(tmp_path)]
    run([*command, "full"], cwd=str(tmp_path))
    full = ranks(str(tmp_path), "full")
    check_split(full, padded=True)  # the scripts assert every batch holds tensors
    assert full[0]["prepared"] == "DataLoaderShard"  # prepared, not passed through
    run([*command, "resume"], cwd=str(tmp_path))
    for before, after in zip(full, ranks(str(tmp_path), "resume"), strict=True):
        assert after["seen"]["0"] == before["seen"]["0"][3:]
        assert after["seen"]["1"] == before["seen"]["1"]


@pytest.mark.timeout(300)
def test_accelerate_checkpoints_the_drop_in_loader_it_did_not_prepare(tmp_path) -> None:
    """The README's recipe that keeps flowloader's engine under Accelerate: our
    DistributedSampler splits the ranks, register_for_checkpointing resumes mid-epoch."""
    pytest.importorskip("accelerate")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc_per_node=2", os.path.join(HERE, "accelerate_ranks.py"), str(tmp_path)]
    run([*command, "engine-full"], cwd=str(tmp_path))
    full = ranks(str(tmp_path), "engine-full")
    check_split(full, padded=False)
    run([*command, "engine-resume"], cwd=str(tmp_path))
    for before, after in zip(full, ranks(str(tmp_path), "engine-resume"), strict=True):
        assert after["seen"]["0"] == before["seen"]["0"][3:]
        assert after["seen"]["1"] == before["seen"]["1"]
