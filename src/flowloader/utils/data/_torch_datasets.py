"""The drop-in's datasets where torch is installed: flowloader's classes that are also
``torch.utils.data``'s, so frameworks that check ``isinstance(dataset, IterableDataset)``
against torch (Lightning's sampler injection, Accelerate's sharding) see what they expect.

Each class takes flowloader's behaviour (batch loading through ``__getitems__``, NumPy arrays
as well as tensors, the clearer errors) and torch's type. ``random_split`` with a
``torch.Generator`` (or torch's global RNG by default) gives torch's split for the same seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import torch
import torch.utils.data as _td

from flowloader import _seed
from flowloader import dataset as _core

T_co = TypeVar("T_co", covariant=True)
T = TypeVar("T")

__all__ = list(_core.__all__)  # the same names as flowloader.dataset


class Dataset(_core.Dataset[T_co], _td.Dataset[T_co]):
    """A map-style dataset (``flowloader.Dataset``), also a ``torch.utils.data.Dataset``."""

    def __add__(self, other: Any) -> ConcatDataset[T_co]:
        return ConcatDataset([self, other])


class IterableDataset(_core.IterableDataset[T_co], Dataset[T_co], _td.IterableDataset[T_co]):
    """A stream of samples (``flowloader.IterableDataset``), also torch's IterableDataset."""

    def __add__(self, other: Any) -> ChainDataset:  # type: ignore[override]
        return ChainDataset([self, other])


class TensorDataset(_core.TensorDataset, Dataset[tuple], _td.TensorDataset):
    """Arrays or tensors indexed along their first dimension."""


class StackDataset(_core.StackDataset, Dataset[Any], _td.StackDataset):
    """Datasets of equal length zipped into tuples or dicts."""


class ConcatDataset(  # type: ignore[misc]  # torch annotates `datasets` otherwise
    _core.ConcatDataset[T_co], Dataset[T_co], _td.ConcatDataset[T_co]
):
    """Map-style datasets one after another."""


class ChainDataset(_core.ChainDataset, IterableDataset[Any], _td.ChainDataset):  # type: ignore[misc]
    """Iterable datasets chained one after another, lazily."""


class Subset(_core.Subset[T_co], Dataset[T_co], _td.Subset[T_co]):  # type: ignore[misc]
    """The samples of a dataset at the given indices."""


def random_split(
    dataset: Any,
    lengths: Sequence[int | float],
    generator: _seed.GeneratorLike = torch.default_generator,
) -> list[Subset[Any]]:
    """Split ``dataset`` at random into non-overlapping subsets, as ``torch.utils.data`` does:
    with a ``torch.Generator`` (torch's global one by default) the same seed gives torch's
    split. An int seed or a ``numpy.random.Generator`` draws with NumPy instead."""
    total = len(dataset)
    counts = _core.split_lengths(total, lengths)
    if isinstance(generator, torch.Generator):
        order = torch.randperm(total, generator=generator).tolist()
    else:
        order = _seed.numpy_rng(_seed.resolve_generator(generator)).permutation(total).tolist()
    return [Subset(dataset, part) for part in _core.cut(order, counts)]
