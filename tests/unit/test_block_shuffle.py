"""BlockShuffleSampler: every row once per epoch, rows of a window from its blocks only, a
new order per epoch, ranks dealt as DistributedSampler deals them, positions computed without
an array per row, and exact resume through the loader."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import flowloader as fl
from flowloader import BlockShuffleSampler


class Blocks(fl.Dataset):
    """A dataset with blocks of its own (as a table's row groups): sample i is i."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes

    def __len__(self) -> int:
        return sum(self.sizes)

    def __getitem__(self, i: int) -> int:
        return i

    def block_sizes(self) -> list[int]:
        return self.sizes


@pytest.mark.parametrize(
    ("n", "block", "window"), [(1000, 100, 3), (1001, 7, 1), (50, 64, 8), (333, 10, 100), (1, 1, 1)]
)
def test_every_row_once_per_epoch(n, block, window) -> None:
    sampler = BlockShuffleSampler(n, block_size=block, window=window, seed=3)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        assert sorted(sampler) == list(range(n))
        assert len(sampler) == n


def test_a_window_reads_only_its_blocks_and_epochs_differ() -> None:
    sampler = BlockShuffleSampler(Blocks([100] * 12), window=3, seed=0)
    order = np.array(list(sampler))
    for start in range(0, 1200, 300):
        assert len(set((order[start : start + 300] // 100).tolist())) == 3
    assert (order[:300] // 100).tolist() != sorted((order[:300] // 100).tolist())  # mixed
    sampler.set_epoch(1)
    assert list(sampler) != order.tolist()
    sampler.set_epoch(0)
    assert list(sampler) == order.tolist()  # the same seed and epoch: the same order


def test_ragged_blocks_and_empty_ones() -> None:
    sizes = [5, 0, 17, 1, 0, 40, 3]
    sampler = BlockShuffleSampler(Blocks(sizes), window=2, seed=1)
    assert sorted(sampler) == list(range(66))


def test_unshuffled_is_sequential() -> None:
    assert list(BlockShuffleSampler(25, block_size=4, shuffle=False)) == list(range(25))


def test_ranks_are_dealt_as_distributed_sampler_deals() -> None:
    whole = list(BlockShuffleSampler(103, block_size=10, window=2, seed=5, num_replicas=1, rank=0))
    parts = [
        list(BlockShuffleSampler(103, block_size=10, window=2, seed=5, num_replicas=3, rank=r))
        for r in range(3)
    ]
    assert [len(p) for p in parts] == [35, 35, 35]
    padded = whole + whole[:2]
    assert [padded[r::3] for r in range(3)] == parts
    dropped = BlockShuffleSampler(
        103, block_size=10, seed=5, num_replicas=3, rank=2, drop_last=True
    )
    assert len(list(dropped)) == 34


def test_positions_of_a_billion_rows_cost_no_array_per_row() -> None:
    sampler = BlockShuffleSampler(10**9, block_size=100_000, window=8, seed=0)
    positions = np.array([0, 1, 10**9 - 1, 123_456_789])
    indices = sampler.indices_at(positions)
    assert ((indices >= 0) & (indices < 10**9)).all()
    iterator = iter(sampler)
    head = [next(iterator) for _ in range(1000)]
    assert head[:4] == sampler.indices_at(np.arange(4)).tolist()
    assert len(set(np.array(head) // 100_000)) <= 8


def test_bad_arguments() -> None:
    with pytest.raises(TypeError, match="needs block_size"):
        BlockShuffleSampler(list(range(10)))
    with pytest.raises(ValueError, match="window should be a positive number of blocks"):
        BlockShuffleSampler(10, block_size=2, window=0)
    with pytest.raises(ValueError, match="block_size should be a positive number of rows"):
        BlockShuffleSampler(10, block_size=0)
    with pytest.raises(ValueError, match="the dataset's blocks hold 9 rows, but it has 10"):
        BlockShuffleSampler(_Lying())


class _Lying(Blocks):
    def __init__(self) -> None:
        super().__init__([4, 5])

    def __len__(self) -> int:
        return 10


def loader(dataset, sampler, workers: int) -> fl.DataLoader:
    return fl.DataLoader(
        dataset,
        batch_size=7,
        sampler=sampler,
        num_workers=workers,
        worker_method="thread",
        collate_fn=list,
    )


@pytest.mark.parametrize(("before", "after"), [(0, 2), (2, 0), (1, 3)])
def test_resume_mid_epoch_onto_other_workers(before, after) -> None:
    dataset = Blocks([30] * 10)
    reference = loader(dataset, BlockShuffleSampler(dataset, window=2, seed=9), 0)
    full = list(reference) + list(reference)
    first = loader(dataset, BlockShuffleSampler(dataset, window=2, seed=9), before)
    taken = []
    for batch in first:
        taken.append(batch)
        if len(taken) == 20:
            break
    state = json.loads(json.dumps(first.state_dict()))
    second = loader(dataset, BlockShuffleSampler(dataset, window=2, seed=9), after)
    second.load_state_dict(state)
    rest = list(second) + list(second)
    assert taken + rest[: len(full) - len(taken)] == full


def test_resume_onto_two_ranks_reads_every_row_once() -> None:
    dataset = Blocks([25] * 8)
    one = loader(dataset, BlockShuffleSampler(dataset, window=3, seed=2, num_replicas=1, rank=0), 0)
    iterator = iter(one)
    seen = [i for _ in range(10) for i in next(iterator)]
    state = one.state_dict()
    for rank in range(2):
        sampler = BlockShuffleSampler(
            dataset, window=3, seed=2, num_replicas=2, rank=rank, drop_last=False
        )
        resumed = loader(dataset, sampler, 0)
        resumed.load_state_dict(state)
        seen += [i for batch in resumed for i in batch]
    assert sorted(set(seen)) == list(range(200))
    assert len(seen) <= 201  # at most one padding sample to even the ranks


@pytest.mark.parametrize(
    ("setting", "match"),
    [
        ({"window": 3}, "sampler window: saved 2, this loader 3"),
        ({"block_size": 5}, "sampler block_size: saved 10, this loader 5"),
        ({"shuffle": False}, "sampler shuffle: saved True, this loader False"),
    ],
)
def test_a_state_from_other_settings_is_refused_once_read(setting, match) -> None:
    """Mid-epoch, another window, block size or shuffle would deliver other rows; before
    anything of the epoch is read, any may change."""

    def loader(**changed: Any) -> fl.DataLoader:
        options = {"block_size": 10, "window": 2, **changed}
        sampler = BlockShuffleSampler(100, num_replicas=1, rank=0, **options)
        return fl.DataLoader(np.arange(100), batch_size=4, sampler=sampler)

    saved = loader()
    untouched = saved.state_dict()
    iterator = iter(saved)
    next(iterator)
    with pytest.raises(ValueError, match=match):
        loader(**setting).load_state_dict(saved.state_dict())
    fresh = loader(**setting)
    fresh.load_state_dict(untouched)
    assert sorted(i for b in fresh for i in b.tolist()) == list(range(100))


def test_one_then_two_then_three_ranks_read_every_row_once() -> None:
    dataset = Blocks([25] * 8)

    def ranks(world: int) -> list[fl.DataLoader]:
        return [
            loader(
                dataset,
                BlockShuffleSampler(
                    dataset, window=3, seed=2, num_replicas=world, rank=r, drop_last=False
                ),
                0,
            )
            for r in range(world)
        ]

    (one,) = ranks(1)
    iterator = iter(one)
    seen = [i for _ in range(6) for i in next(iterator)]
    state = one.state_dict()
    two = ranks(2)
    iterators = []
    for resumed in two:
        resumed.load_state_dict(state)
        iterators.append(iter(resumed))
    seen += [i for _ in range(4) for it in iterators for i in next(it)]  # in lockstep
    state = two[0].state_dict()
    for resumed in ranks(3):
        resumed.load_state_dict(state)
        seen += [i for batch in resumed for i in batch]
    assert sorted(set(seen)) == list(range(200))
    assert len(seen) <= 200 + 2 + 1  # padding only: to even 2 ranks, then 3
