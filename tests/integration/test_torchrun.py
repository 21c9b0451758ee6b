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

HERE = os.path.dirname(__file__)


def torchrun(nproc: int, script: str, *args: object) -> list[dict]:
    """Run ``script`` on ``nproc`` CPU ranks; returns what rank 0 gathered (its last argument
    is the file it writes)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += [f"--nproc_per_node={nproc}", os.path.join(HERE, script), *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=200, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    with open(args[-1]) as f:
        return json.load(f)


@pytest.mark.timeout(240)
# 24 (even) in the quick suite, 23 (odd: a padded rank) once in CI's slow stage
@pytest.mark.parametrize("n", [pytest.param(23, marks=pytest.mark.slow), 24])
def test_shards_under_torchrun(tmp_path, n) -> None:
    ranks = torchrun(2, "torchrun_shards.py", n, tmp_path / "ranks.json")
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
    for r in ranks:  # a loader that would hand every rank the whole dataset warns, once
        [warned] = r["duplicate_warnings"]
        assert "runs 2 processes" in warned
        assert "DistributedSampler(dataset)" in warned


@pytest.mark.timeout(240)
# 2 -> 3 in the quick suite, 3 -> 2 once in CI's slow stage (each starts two torchrun jobs)
@pytest.mark.parametrize(("before", "after"), [(2, 3), pytest.param(3, 2, marks=pytest.mark.slow)])
def test_a_position_saved_on_one_world_size_continues_on_another(tmp_path, before, after) -> None:
    n = 31
    state = tmp_path / "state.json"
    saved = torchrun(before, "torchrun_reshard.py", "save", n, state, tmp_path / "a.json")
    resumed = torchrun(after, "torchrun_reshard.py", "resume", n, state, tmp_path / "b.json")
    seen = [i for r in saved for b in r["batches"] for i in b]
    assert len(seen) == len(set(seen)) == before * 2 * 3  # two batches of 3 per rank, disjoint
    rest = [[i for b in r["batches"] for i in b] for r in resumed]
    assert len({len(r["batches"]) for r in resumed}) == 1  # every rank: as many batches
    assert len({len(shard) for shard in rest}) == 1  # ... and samples (padding rule)
    flat = [i for shard in rest for i in shard]
    missing = set(range(n)) - set(seen)
    assert set(flat) - set(seen) == missing  # everything not yet delivered ...
    assert len(flat) - len(missing) < after  # ... once, plus padding to even the ranks out
    following = [[i for b in r["next_epoch"] for i in b] for r in resumed]
    assert set().union(*following) == set(range(n))  # the next epoch is whole again
    assert len(following[0]) == math.ceil(n / after)
