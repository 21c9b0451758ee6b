"""num_workers in {1, 2, 3} must give exactly the batches of num_workers=0."""

from __future__ import annotations

import numpy as np
import pytest

import flowloader as fl

from ..trees import assert_same_tree
from .loader_datasets import Arrays, Stream


def batches(**kwargs) -> list:
    return list(fl.DataLoader(Arrays(kwargs.pop("n", 23), kwargs.pop("delay_s", 0.0)), **kwargs))


def assert_equal_batches(a, b) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert_same_tree(x, y)


# Factories, because samplers with a generator are stateful: each run gets a fresh one.
CONFIGS = {
    "batch": lambda: {"batch_size": 4},
    "drop_last": lambda: {"batch_size": 4, "drop_last": True},
    "shuffle": lambda: {"batch_size": 5, "shuffle": True, "generator": 7},
    "subset_sampler": lambda: {
        "batch_size": 3,
        "sampler": fl.SubsetRandomSampler(list(range(0, 23, 2)), generator=1),
    },
    "batch_sampler": lambda: {
        "batch_sampler": fl.BatchSampler(fl.SequentialSampler(range(23)), 6, False)
    },
    "no_batching": lambda: {"batch_size": None},
    "no_batching_shuffle": lambda: {"batch_size": None, "shuffle": True, "generator": 3},
    "weighted": lambda: {
        "batch_size": 2,
        "sampler": fl.WeightedRandomSampler([1.0] * 23, 11, generator=2),
    },
}


@pytest.mark.parametrize("num_workers", [1, 2, 3])
@pytest.mark.parametrize("config", CONFIGS)
def test_same_batches_as_in_process(config, num_workers) -> None:
    make = CONFIGS[config]
    assert_equal_batches(batches(num_workers=num_workers, **make()), batches(**make()))


def test_order_kept_under_random_delays() -> None:
    loaded = batches(n=40, delay_s=0.02, batch_size=2, num_workers=3, prefetch_factor=3)
    assert [b["label"].tolist() for b in loaded] == [[i, i + 1] for i in range(0, 40, 2)]


def test_out_of_order_delivery_still_delivers_everything() -> None:
    loaded = batches(n=40, delay_s=0.02, batch_size=2, num_workers=3, in_order=False)
    labels = sorted(int(i) for b in loaded for i in b["label"])
    assert labels == list(range(40))


def test_several_epochs_and_len() -> None:
    loader = fl.DataLoader(Arrays(10), batch_size=3, num_workers=2, shuffle=True, generator=0)
    assert len(loader) == 4
    epochs = [sorted(int(i) for b in loader for i in b["label"]) for _ in range(3)]
    assert epochs == [list(range(10))] * 3


@pytest.mark.parametrize("num_workers", [1, 2, 3])
@pytest.mark.parametrize("batch_size", [None, 3])
def test_iterable_dataset_sharded_by_worker_info(num_workers, batch_size) -> None:
    loader = fl.DataLoader(Stream(20), batch_size=batch_size, num_workers=num_workers)
    values = [int(v) for b in loader for v in np.atleast_1d(b)]
    assert sorted(values) == list(range(20))


def test_iterable_dataset_batch_order_matches_round_robin() -> None:
    # Worker w yields w, w+2, ...; batches alternate between the workers, as in PyTorch.
    loader = fl.DataLoader(Stream(12), batch_size=2, num_workers=2)
    assert [b.tolist() for b in loader] == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9, 11]]


def test_iterable_dataset_without_sharding_duplicates_like_pytorch() -> None:
    loader = fl.DataLoader(Stream(5, shard=False), batch_size=None, num_workers=2)
    assert sorted(int(v) for v in loader) == sorted(list(range(5)) * 2)


def test_iterable_dataset_drop_last_per_worker() -> None:
    loader = fl.DataLoader(Stream(10), batch_size=2, drop_last=True, num_workers=2)
    # each worker holds 5 values: two full batches each, the odd one dropped
    assert sum(len(b) for b in loader) == 8
