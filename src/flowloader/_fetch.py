"""Fetchers: turn what the sampler yields (an index, or a list of indices) into a batch.

Shared by the in-process iterator and the worker processes, so both paths load identically.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from . import _sample_rng, stats


class MapFetcher:
    """Map-style datasets: with auto-collation, one ``__getitems__`` call per batch when the
    dataset defines it, else ``dataset[i]`` per index; then ``collate_fn``."""

    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Callable[[Any], Any]):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        getitems = getattr(dataset, "__getitems__", None)
        self._getitems = getitems if getitems else None

    def fetch(self, index: Any) -> Any:
        clock = stats.active_clock()
        start = time.perf_counter() if clock is not None else 0.0
        if not self.auto_collation:
            _sample_rng.set_index(index)
            data = self.dataset[index]
        elif self._getitems is not None:
            _sample_rng.set_index(index)
            data = self._getitems(index)
        else:  # each sample with its own generator (sample_rng)
            data = _sample_rng.load_one_by_one(self.dataset, index)
        _sample_rng.set_index(None)
        return _collate_timed(self.collate_fn, data, clock, start)


class IterableFetcher:
    """Iterable datasets: take the next sample, or the next ``len(index)`` samples as a batch.

    A short final batch is kept unless ``drop_last``; raises StopIteration when the stream ends.
    """

    def __init__(
        self, dataset: Any, auto_collation: bool, collate_fn: Callable[[Any], Any], drop_last: bool
    ):
        self.dataset_iter: Iterator[Any] = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.ended = False

    def fetch(self, index: Any) -> Any:
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.dataset_iter))
        samples = []
        for _ in index:
            try:
                samples.append(next(self.dataset_iter))
            except StopIteration:
                self.ended = True
                break
        if not samples or (self.drop_last and len(samples) < len(index)):
            raise StopIteration
        return self.collate_fn(samples)


def _collate_timed(
    collate_fn: Callable[[Any], Any], data: Any, clock: stats.StageClock | None, start: float
) -> Any:
    """``collate_fn(data)``, recording the dataset time (since ``start``) and collate time."""
    if clock is None:
        return collate_fn(data)
    fetched = time.perf_counter()
    batch = collate_fn(data)
    clock.fetch += fetched - start
    clock.collate += time.perf_counter() - fetched
    return batch


def make_fetcher(
    dataset: Any,
    iterable: bool,
    auto_collation: bool,
    collate_fn: Callable[[Any], Any],
    drop_last: bool,
) -> MapFetcher | IterableFetcher:
    """The fetcher for this dataset kind (an iterable fetcher starts the dataset's iterator)."""
    if iterable:
        return IterableFetcher(dataset, auto_collation, collate_fn, drop_last)
    return MapFetcher(dataset, auto_collation, collate_fn)
