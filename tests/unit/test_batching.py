"""The batch contract's helpers (batching.py): what a ``__getitems__`` declares is read once
per function, without keeping that function, or the dataset it holds, alive."""

from __future__ import annotations

import functools
import gc
import weakref

import numpy as np
import pytest

import flowloader as fl
from flowloader.batching import Declared, declared


def load(dataset: Squares, indices: list, rngs=None) -> list:
    return [dataset[i] for i in indices]


class Squares(fl.Dataset):
    """A dataset whose ``__getitems__`` is its own: a closure or a partial holding it."""

    def __init__(self, kind: str) -> None:
        if kind == "closure":
            self.__getitems__ = lambda indices, rngs=None: load(self, indices, rngs)
        else:
            self.__getitems__ = functools.partial(load, self)

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int):
        return np.int64(i * i)


@pytest.mark.parametrize("kind", ["closure", "partial"])
def test_a_per_instance_getitems_does_not_keep_its_dataset_alive(kind) -> None:
    dataset = Squares(kind)
    assert declared(dataset.__getitems__) == Declared(rngs=True, allocate=False)
    loader = fl.DataLoader(dataset, batch_size=4)
    assert [b.tolist() for b in loader] == [[0, 1, 4, 9], [16, 25, 36, 49]]
    gone = weakref.ref(dataset)
    del dataset, loader
    gc.collect()  # the dataset and its __getitems__ hold each other
    assert gone() is None


class Unhashable:
    __hash__ = None  # type: ignore[assignment]

    def __call__(self, indices: list, allocate=None) -> list:
        return list(indices)


def test_a_callable_that_cannot_be_cached_is_read_every_time() -> None:
    assert declared(Unhashable()) == Declared(rngs=False, allocate=True)
