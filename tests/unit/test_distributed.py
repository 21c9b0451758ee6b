from __future__ import annotations

import pytest

import flowloader as fl


def shards(n: int, world: int, **kwargs) -> list[list[int]]:
    return [list(fl.DistributedSampler(range(n), world, rank, **kwargs)) for rank in range(world)]


def test_shards_are_disjoint_and_cover_without_shuffle() -> None:
    parts = shards(10, 2, shuffle=False)
    assert parts == [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]


def test_padding_repeats_the_start_so_every_rank_gets_as_many() -> None:
    parts = shards(10, 4, shuffle=False)
    assert [len(p) for p in parts] == [3, 3, 3, 3]
    flat = sorted(i for p in parts for i in p)
    assert flat == sorted([*range(10), 0, 1])


def test_padding_when_the_dataset_is_smaller_than_the_world() -> None:
    parts = shards(2, 5, shuffle=False)
    assert parts == [[0], [1], [0], [1], [0]]


def test_drop_last_cuts_the_tail() -> None:
    parts = shards(10, 4, shuffle=False, drop_last=True)
    assert [len(p) for p in parts] == [2, 2, 2, 2]
    assert sorted(i for p in parts for i in p) == list(range(8))
    assert len(fl.DistributedSampler(range(10), 4, 0, drop_last=True)) == 2


def test_shuffle_agrees_across_ranks_and_changes_with_epoch() -> None:
    samplers = [fl.DistributedSampler(range(20), 3, r, seed=5) for r in range(3)]
    epoch0 = [list(s) for s in samplers]
    flat = [i for p in epoch0 for i in p]
    assert len(flat) == 21
    assert set(flat) == set(range(20))
    for s in samplers:
        s.set_epoch(1)
    epoch1 = [list(s) for s in samplers]
    assert epoch0 != epoch1
    assert [list(s) for s in samplers] == epoch1  # same epoch, same order


def test_rank_and_world_from_torchrun_environment(monkeypatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("RANK", "2")
    sampler = fl.DistributedSampler(range(9), shuffle=False)
    assert (sampler.num_replicas, sampler.rank) == (3, 2)
    assert list(sampler) == [2, 5, 8]


def test_explicit_arguments_override_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("RANK", "2")
    sampler = fl.DistributedSampler(range(8), num_replicas=4, shuffle=False)
    assert (sampler.num_replicas, sampler.rank) == (4, 2)
    assert list(fl.DistributedSampler(range(8), rank=0, shuffle=False)) == [0, 3, 6]


def test_missing_world_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(ValueError, match="torchrun"):
        fl.DistributedSampler(range(4))


def test_bad_environment_values(monkeypatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "two")
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(ValueError, match="integers"):
        fl.DistributedSampler(range(4))


@pytest.mark.parametrize(("world", "rank"), [(2, 2), (2, -1), (0, 0)])
def test_invalid_rank(world, rank) -> None:
    with pytest.raises(ValueError, match=r"rank|num_replicas"):
        fl.DistributedSampler(range(4), world, rank)
