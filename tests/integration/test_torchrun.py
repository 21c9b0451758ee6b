"""A real multi-process run: torchrun --nproc_per_node=2 with the gloo backend on CPU."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.torch

SCRIPT = os.path.join(os.path.dirname(__file__), "torchrun_shards.py")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("n", [23, 24])
def test_shards_under_torchrun(tmp_path, n) -> None:
    out = tmp_path / "ranks.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            SCRIPT,
            str(n),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=200,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    ranks = json.loads(out.read_text())
    assert len(ranks) == 2
    shards = [[i for b in r["batches"] for i in b] for r in ranks]
    per_rank = math.ceil(n / 2)
    assert [len(s) for s in shards] == [per_rank, per_rank]  # PyTorch's padding rule
    assert set(shards[0]) | set(shards[1]) == set(range(n))  # they cover the dataset
    overlap = sorted(set(shards[0]) & set(shards[1]))
    assert len(overlap) == 2 * per_rank - n  # only the padding repeats
    assert len(ranks[0]["batches"]) == len(ranks[1]["batches"])  # same number of batches
    for r in ranks:
        assert r["resumed"] == r["batches"]  # resume per rank, with another num_workers
    streamed = ranks[0]["stream"] + ranks[1]["stream"]
    assert sorted(streamed) == list(range(n))  # rank x worker sharding: each item once
