"""Datasets with PyTorch's semantics: map-style, iterable, and the ways to combine them."""

from __future__ import annotations

import bisect
import itertools
import math
import typing
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from . import _seed
from ._compat import torch as _torch
from ._warn import warn_at_user
from .batching import Allocate, fetch_many, load_one_by_one, overrides_getitem
from .order import Read, digest, epoch_of, hand_epoch, order_changes, order_state
from .randomness import SampleRngs

T_co = TypeVar("T_co", covariant=True)
T = TypeVar("T")

__all__ = [
    "ChainDataset",
    "ConcatDataset",
    "Dataset",
    "IterableDataset",
    "StackDataset",
    "Subset",
    "TensorDataset",
    "random_split",
]


class Dataset(Generic[T_co]):
    """A map-style dataset: ``dataset[i]`` returns sample ``i``.

    Subclasses implement ``__getitem__`` and usually ``__len__``. They may also implement
    ``__getitems__(indices)`` returning a list of samples, which the loader then calls once per
    batch instead of calling ``__getitem__`` once per sample.
    """

    def __getitem__(self, index: Any) -> T_co:
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __add__(self, other: Dataset[T_co]) -> ConcatDataset[T_co]:
        return ConcatDataset([self, other])


# typing's Iterable (not collections.abc's) as the base, for torch's method resolution order:
# the drop-in's IterableDataset derives from this class and from torch's.
class IterableDataset(Dataset[T_co], typing.Iterable[T_co]):
    """A stream of samples: subclasses implement ``__iter__``.

    With worker processes, every worker iterates its own copy; shard the stream inside
    ``__iter__`` with :func:`flowloader.get_worker_info` to avoid duplicates, as in PyTorch.
    """

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __add__(self, other: Dataset[T_co]) -> ChainDataset:  # type: ignore[override]
        return ChainDataset([self, other])


def _first_dim(array: Any) -> int:
    shape = getattr(array, "shape", None)
    if shape is None or len(shape) == 0:
        raise TypeError(
            "TensorDataset takes arrays or tensors with at least one dimension, "
            f"but got {type(array).__name__}" + ("" if shape is None else " with shape ()")
        )
    return int(shape[0])


class TensorDataset(Dataset[tuple]):
    """Sample ``i`` is ``tuple(a[i] for a in arrays)``, over NumPy arrays or torch tensors."""

    def __init__(self, *tensors: Any) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one array")
        sizes = [_first_dim(t) for t in tensors]
        if any(size != sizes[0] for size in sizes):
            raise AssertionError(
                f"Size mismatch between tensors: first dimensions are {sizes}; "
                "every array must have the same number of samples"
            )
        self.tensors = tensors

    def __getitem__(self, index: Any) -> tuple:
        return tuple(tensor[index] for tensor in self.tensors)

    def __len__(self) -> int:
        return _first_dim(self.tensors[0])


class StackDataset(Dataset[Any]):
    """Zip datasets of equal length: positional ones give tuples, keyword ones give dicts."""

    def __init__(self, *args: Dataset[Any], **kwargs: Dataset[Any]) -> None:
        if args and kwargs:
            raise ValueError(
                "Supported either ``tuple``- (via ``args``) or ``dict``- (via ``kwargs``) like "
                "input/output, but both types are given: StackDataset takes datasets either "
                "positionally (tuple samples) or by keyword (dict samples), not both"
            )
        parts = list(args) or list(kwargs.values())
        if not parts:
            raise ValueError("At least one dataset should be passed to StackDataset")
        lengths = [len(d) for d in parts]  # type: ignore[arg-type]
        if any(n != lengths[0] for n in lengths):
            raise ValueError(f"Size mismatch between datasets: lengths are {lengths}")
        self._length = lengths[0]
        self.datasets: tuple | dict = args if args else kwargs

    def __getitem__(self, index: Any) -> Any:
        if isinstance(self.datasets, dict):
            return {key: d[index] for key, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list, rngs: Sequence[Any] | None = None) -> list:
        if overrides_getitem(self, StackDataset):
            return load_one_by_one(self, indices, rngs)
        named = isinstance(self.datasets, dict)
        keys = list(self.datasets) if named else range(len(self.datasets))
        columns = [fetch_many(self.datasets[key], indices, rngs) for key in keys]
        if named:
            return [dict(zip(keys, row, strict=True)) for row in zip(*columns, strict=True)]
        return [tuple(row) for row in zip(*columns, strict=True)]

    def __len__(self) -> int:
        return self._length


class ConcatDataset(Dataset[T_co]):
    """The concatenation of map-style datasets; negative indices count from the end."""

    datasets: list[Dataset[T_co]]
    cumulative_sizes: list[int]

    @staticmethod
    def cumsum(sequence: Iterable[Any]) -> list[int]:
        return list(itertools.accumulate(len(d) for d in sequence))

    def __init__(self, datasets: Iterable[Dataset[Any]]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable (ConcatDataset)")
        for position, d in enumerate(self.datasets):
            if is_iterable(d):
                raise AssertionError(
                    f"ConcatDataset does not support IterableDataset: dataset {position} is "
                    f"one ({type(d).__name__}); use ChainDataset for streams"
                )
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    # -- flowloader.order's contract, passed through to the parts --------------------------

    @property
    def epoch(self) -> int | None:
        return next((e for e in map(epoch_of, self.datasets) if e is not None), None)

    def set_epoch(self, epoch: int) -> None:
        """Hand ``epoch`` to every part that takes one (a part's length may follow it)."""
        for d in self.datasets:
            hand_epoch(d, epoch)
        self.cumulative_sizes = self.cumsum(self.datasets)

    def order_state(self) -> dict[str, Any] | None:
        parts = [order_state(d) for d in self.datasets]
        if all(part is None for part in parts):
            return None
        return {"format": "flowloader.ConcatDataset", "lengths": _lengths(self), "parts": parts}

    def order_changes(self, saved: dict[str, Any], read: Read) -> list[str]:
        """Each part over the positions ``read`` covers of it: the parts wholly read keep
        their lengths (the ones after would shift), the part the prefix ends in is checked
        up to it (its own check, or its length), and the parts after it for what earlier
        epochs read of them."""
        if not isinstance(saved, dict) or saved.get("format") != "flowloader.ConcatDataset":
            return ["the state does not describe a ConcatDataset"]
        lengths = _lengths(self)
        if len(saved["lengths"]) != len(lengths):
            return [f"ConcatDataset had {len(saved['lengths'])} parts, now {len(lengths)}"]
        differences = []
        start = 0
        parts = zip(self.datasets, saved["lengths"], lengths, strict=True)
        for k, (d, old, new) in enumerate(parts):
            # a part after the prefix read none of this epoch (earlier epochs may matter)
            within = None if read.prefix is None else max(read.prefix - start, 0)
            describes = order_state(d) is not None
            touched = within is None or within > 0
            if touched and (not describes or within is None or within > old) and old != new:
                differences.append(f"ConcatDataset part {k} had {old} samples, now {new}")
            if describes:
                found = order_changes(d, saved["parts"][k], read.at(within))
                differences += [f"ConcatDataset part {k}: {one}" for one in found]
            start += old
        return differences

    def __getitem__(self, idx: int) -> T_co:
        length = len(self)
        if idx < 0:
            if -idx > length:
                raise ValueError(
                    f"index {idx} is out of range for ConcatDataset of length {length}"
                )
            idx += length
        if idx >= length:
            raise IndexError(f"index {idx} is out of range for ConcatDataset of length {length}")
        dataset_idx = bisect.bisect_right(self.cumulative_sizes, idx)
        offset = self.cumulative_sizes[dataset_idx - 1] if dataset_idx else 0
        return self.datasets[dataset_idx][idx - offset]


def is_iterable(dataset: Any) -> bool:
    """An IterableDataset: ours, or torch's (code written for torch.utils.data)."""
    return isinstance(dataset, IterableDataset) or _torch.is_iterable_dataset(dataset)


class ChainDataset(IterableDataset):
    """Iterable datasets chained one after another, lazily."""

    def __init__(self, datasets: Iterable[Dataset[Any]]) -> None:
        self.datasets = datasets

    def _checked(self) -> Iterator[Any]:
        for d in self.datasets:
            if not is_iterable(d):
                raise AssertionError(
                    f"ChainDataset only supports IterableDataset, but got {type(d).__name__}"
                )
            yield d

    def __iter__(self) -> Iterator[Any]:
        for d in self._checked():
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self._checked())


class Subset(Dataset[T_co]):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx: Any) -> T_co:
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(
        self,
        indices: list[int],
        rngs: Sequence[Any] | None = None,
        allocate: Allocate | None = None,
    ) -> Any:
        if overrides_getitem(self, Subset):
            return load_one_by_one(self, indices, rngs)
        inner = [self.indices[i] for i in indices]
        # Draws stay keyed by the wrapped dataset's own indices, as when it is loaded alone.
        if isinstance(rngs, SampleRngs):
            rngs = rngs.for_indices(inner)
        return fetch_many(self.dataset, inner, rngs, allocate)

    def __len__(self) -> int:
        return len(self.indices)

    # -- flowloader.order's contract, passed through to the wrapped dataset ----------------

    @property
    def epoch(self) -> int | None:
        return epoch_of(self.dataset)

    def set_epoch(self, epoch: int) -> None:
        hand_epoch(self.dataset, epoch)

    def order_state(self) -> dict[str, Any] | None:
        inner = order_state(self.dataset)
        if inner is None:
            return None
        return {"format": "flowloader.Subset", "indices": digest(self.indices), "dataset": inner}

    def order_changes(self, saved: dict[str, Any], read: Read) -> list[str]:
        """The indices must be the same; the wrapped dataset is checked below the largest
        index read (all of it when any position may have been read)."""
        if not isinstance(saved, dict) or saved.get("format") != "flowloader.Subset":
            return ["the state does not describe a Subset"]
        if saved["indices"] != digest(self.indices):
            return ["the Subset's indices changed"]
        inner = None
        if read.prefix is not None:
            taken = np.asarray(self.indices[: read.prefix], dtype=np.int64)
            inner = int(taken.max()) + 1 if taken.size else 0
        found = order_changes(self.dataset, saved["dataset"], read.at(inner))
        return [f"Subset's dataset: {difference}" for difference in found]


def _lengths(concat: ConcatDataset[Any]) -> list[int]:
    return [len(d) for d in concat.datasets]  # type: ignore[arg-type]


def split_lengths(total: int, lengths: Sequence[int | float]) -> list[int]:
    """The size of each split of ``total`` samples: ``lengths`` as sizes summing to ``total``,
    or fractions summing to 1 (PyTorch's rounding: floor each, then hand out the remainder
    one by one from the first split)."""
    fractions_sum = sum(lengths)
    if math.isclose(fractions_sum, 1) and fractions_sum <= 1:
        counts = []
        for i, fraction in enumerate(lengths):
            if not 0 <= fraction <= 1:
                raise ValueError(f"Fraction at index {i} is {fraction}, not between 0 and 1")
            counts.append(math.floor(total * fraction))
        for i in range(total - sum(counts)):
            counts[i % len(counts)] += 1
        for i, count in enumerate(counts):
            if count == 0:
                warn_at_user(f"Length of split at index {i} is 0; that split is an empty dataset.")
    else:
        counts = [int(n) for n in lengths]
    if sum(counts) != total:
        raise ValueError(
            "Sum of input lengths does not equal the length of the input dataset! "
            f"({sum(counts)} vs {total})"
        )
    return counts


def cut(order: list[int], counts: list[int]) -> list[list[int]]:
    """``order`` cut into consecutive pieces of ``counts`` indices."""
    ends = itertools.accumulate(counts)
    return [order[end - n : end] for end, n in zip(ends, counts, strict=True)]


def random_split(
    dataset: Dataset[T], lengths: Sequence[int | float], generator: _seed.GeneratorLike = None
) -> list[Subset[T]]:
    """Split ``dataset`` at random into non-overlapping subsets.

    ``lengths`` are sizes summing to ``len(dataset)``, or fractions summing to 1 (PyTorch's
    rounding: floor each, then hand out the remainder one by one from the first split).
    ``generator`` is an int seed, a ``numpy.random.Generator`` or None (NumPy's global RNG).
    """
    total = len(dataset)  # type: ignore[arg-type]
    counts = split_lengths(total, lengths)
    rng = _seed.numpy_rng(_seed.resolve_generator(generator))
    return [Subset(dataset, part) for part in cut(rng.permutation(total).tolist(), counts)]
