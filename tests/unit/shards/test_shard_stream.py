"""ShardStream: shards read front to back (pipe:, HTTP, local), split over workers, resumed by
(shard, sample) in process, and a clear refusal where a resume cannot be exact."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import flowloader as fl
from flowloader.shards import ShardFormatError, ShardStream

from ...shard_server import ShardServer


def number(sample) -> int:
    return int(sample["txt"].split()[1])


def test_every_sample_in_order_from_local_and_pipe_urls(shards) -> None:
    assert [number(s) for s in ShardStream(shards)] == list(range(35))
    piped = [f"pipe:cat {path}" for path in shards]
    samples = list(ShardStream(piped))
    assert [number(s) for s in samples] == list(range(35))
    assert samples[0]["__url__"] == piped[0]
    assert samples[0]["bin"] == b""


def test_a_folder_or_a_glob_of_shards(shards, tmp_path) -> None:
    assert ShardStream(str(tmp_path)).urls == shards
    assert [number(s) for s in ShardStream(str(tmp_path / "part-*.tar"))] == list(range(35))


def test_a_failing_command_is_named(tmp_path) -> None:
    with pytest.raises(OSError, match="exited with status"):
        list(ShardStream([f"pipe:cat {tmp_path}/missing.tar"]))


def test_a_truncated_stream_is_an_error_naming_it(shards, tmp_path) -> None:
    cut = tmp_path / "cut.tar"
    with open(shards[0], "rb") as stream:
        cut.write_bytes(stream.read()[:2500])
    with pytest.raises(ShardFormatError, match=r"cut\.tar"):
        list(ShardStream([str(cut)]))


def test_over_http(shards, tmp_path) -> None:
    with ShardServer(str(tmp_path)) as server:
        urls = [server.url(os.path.basename(s)) for s in shards]
        assert [number(s) for s in ShardStream(urls)] == list(range(35))


def test_workers_split_whole_shards_and_read_each_sample_once(shards) -> None:
    stream = ShardStream(shards, transform=number)
    loader = fl.DataLoader(stream, batch_size=4, num_workers=2)
    seen = np.concatenate(list(loader)).tolist()
    assert sorted(seen) == list(range(35))


def test_in_process_resume_by_shard_and_sample(shards) -> None:
    first = fl.DataLoader(ShardStream(shards, transform=number), batch_size=4)
    iterator = iter(first)
    delivered = [next(iterator).tolist() for _ in range(3)]  # 12 samples: mid shard 1
    state = json.loads(json.dumps(first.state_dict()))
    assert state["dataset"] == {"shards_done": 1, "samples_in_shard": 4}
    transformed = []
    resumed = fl.DataLoader(
        ShardStream(shards, transform=lambda s: transformed.append(1) or number(s)), batch_size=4
    )
    resumed.load_state_dict(state)
    rest = [x for batch in resumed for x in batch.tolist()]
    assert [x for batch in delivered for x in batch] + rest == list(range(35))
    assert len(transformed) == 35 - 12  # skipped samples were not transformed


def test_resuming_onto_another_num_workers_is_refused(shards) -> None:
    first = fl.DataLoader(ShardStream(shards, transform=number), batch_size=4, num_workers=2)
    iterator = iter(first)
    next(iterator)
    state = first.state_dict()
    del iterator
    other = fl.DataLoader(ShardStream(shards, transform=number), batch_size=4, num_workers=3)
    with pytest.raises(ValueError, match="same num_workers"):
        other.load_state_dict(state)
