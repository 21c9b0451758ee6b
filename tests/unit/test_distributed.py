from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def run_ranks(n: int, world: int, state: dict | None, batches: int | None, **kwargs):
    """Every rank of a world, one after the other in this process: each loads ``state`` (if
    any) and takes ``batches`` batches (None: the rest of the pass). Returns what each rank
    delivered and rank 0's state afterwards (every rank's position is the same)."""
    delivered, states = [], []
    for rank in range(world):
        sampler = fl.DistributedSampler(range(n), world, rank, seed=11, **kwargs)
        loader = fl.DataLoader(list(range(n)), batch_size=3, sampler=sampler)
        if state is not None:
            loader.load_state_dict(state)
        iterator = iter(loader)  # kept alive: a dropped iterator's epoch counts as over
        taken = itertools.islice(iterator, batches)  # islice(_, None) takes all
        delivered.append([i for b in taken for i in b.tolist()])
        states.append(loader.state_dict())
        del iterator
    positions = [(s["epoch"], s["batches_yielded"], s["sampler"]) for s in states]
    assert len(set(map(repr, positions))) == 1  # the global RNG's state aside
    return delivered, states[0]


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 40),
    worlds=st.lists(st.integers(1, 5), min_size=2, max_size=3),
    stops=st.lists(st.integers(0, 3), min_size=2, max_size=2),
    drop_last=st.booleans(),
)
def test_a_position_continues_on_other_world_sizes(n, worlds, stops, drop_last) -> None:
    """Save mid-epoch on one world size, continue on another (and maybe a third): nothing
    delivered twice but padding, nothing lost but what drop_last drops, ranks stay even."""
    seen: list[int] = []
    state, epoch = None, 0
    for hop, world in enumerate(worlds):
        last = hop == len(worlds) - 1
        if state is not None and state["epoch"] != epoch:
            seen, epoch = [], state["epoch"]  # the saved epoch was over: a whole new one
        delivered, state = run_ranks(
            n, world, state, None if last else stops[hop], drop_last=drop_last
        )
        assert len({len(d) for d in delivered}) == 1  # every rank as many samples
        flat = [i for d in delivered for i in d]
        fresh = [i for i in flat if i not in seen]
        unseen = n - len(set(seen))
        if drop_last:
            assert len(flat) == len(set(flat)) == len(fresh)  # no padding, no repeats
            if last:
                assert unseen - len(fresh) < max(worlds)  # only a tail that does not divide
        else:
            assert len(set(fresh)) == len(fresh) or len(fresh) - len(set(fresh)) < world
            if last:
                assert set(fresh) == set(range(n)) - set(seen)  # the rest, all of it
        seen += flat


def test_length_reports_the_remaining_pass_then_the_epoch() -> None:
    sampler = fl.DistributedSampler(range(20), 2, 0, shuffle=False)
    sampler.load_state_dict({"epoch": 0, "seed": 0, "num_replicas": 4, "start": 0})
    assert sampler.restart_after(3)  # 4 ranks took 3 each: 12 delivered, 8 left for 2 ranks
    assert len(sampler) == 4
    assert list(sampler) == [12, 14, 16, 18]
    assert len(sampler) == 10  # the next pass is a whole epoch again
    assert list(sampler) == list(range(0, 20, 2))


def test_same_world_size_leaves_the_skipping_to_the_loader() -> None:
    sampler = fl.DistributedSampler(range(20), 2, 1)
    sampler.load_state_dict(sampler.state_dict())
    assert not sampler.restart_after(3)
    assert sampler.start == 0


def test_which_samplers_split_the_data_by_rank() -> None:
    from flowloader.distributed import duplicated_across_ranks, splits_by_rank

    data = list(range(10))
    ours = fl.DistributedSampler(data, num_replicas=2, rank=0)
    assert splits_by_rank(ours)
    assert splits_by_rank(fl.BatchSampler(ours, 3, False))
    assert not splits_by_rank(fl.RandomSampler(data))
    assert not splits_by_rank(fl.BatchSampler(fl.SequentialSampler(data), 3, False))

    class Mine(fl.Sampler):
        splits_by_rank = True

    assert splits_by_rank(Mine())
    # Without torch.distributed running there is nothing to duplicate.
    assert duplicated_across_ranks(fl.RandomSampler(data), None) is None


def test_samplers_that_default_to_one_rank_still_refuse_a_bad_environment(monkeypatch) -> None:
    """Without WORLD_SIZE and RANK they read everything alone; with them malformed they raise
    rather than read everything on every rank."""
    mixture = fl.Mixture([list(range(8)), list(range(8))], [0.5, 0.5])
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    assert fl.BlockShuffleSampler(16, block_size=4).num_replicas == 1
    assert fl.MixtureBatchSampler(mixture, 2).num_replicas == 1
    monkeypatch.setenv("WORLD_SIZE", "two")
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(ValueError, match="integers"):
        fl.BlockShuffleSampler(16, block_size=4)
    with pytest.raises(ValueError, match="integers"):
        fl.MixtureBatchSampler(mixture, 2)
