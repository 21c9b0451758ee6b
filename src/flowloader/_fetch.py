"""Fetchers: turn what the sampler yields (an index, or a list of indices) into a batch.

Shared by in-process loading and the workers (processes and threads), so every path loads
identically. ``allocate`` (where the batch is built: a worker process's shared memory, a
worker thread's reused block for large batches) reaches the dataset's ``__getitems__`` and
``default_collate`` as an argument (see :mod:`flowloader.batching`). A ``collate_fn`` of
the user's runs inside the batch's :class:`~flowloader.batching.batch_context`, so that
``batch_rng()`` is the batch's own generator (the batch's number comes with its task).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from . import stats
from ._skip import SkippedSample, skipped_from
from .batching import (
    Allocate,
    Declared,
    batch_context,
    call_getitems,
    declared,
    load_one_by_one,
)
from .collate import collate, default_collate, default_collate_fn_map
from .errors import name_sample
from .randomness import SampleRngs, SampleSeeds, sample_context


class EmptyBatch(Exception):
    """Every sample of the task was skipped (``skip_errors``): nothing to hand out."""


def stop_in_map_style(error: StopIteration) -> RuntimeError:
    """A map-style dataset raised StopIteration. Raised as it is, it would end the user's
    ``for`` loop silently, mid-epoch (as PEP 479 says of generators): make it an error."""
    wrapped = RuntimeError(
        f"the dataset raised StopIteration ({error!r}) while loading a sample; a map-style "
        "dataset has a fixed length and raises IndexError (or KeyError) for a missing sample"
    )
    wrapped.__cause__ = error
    return wrapped


class MapFetcher:
    """Map-style datasets: with auto-collation, one ``__getitems__`` call per batch when the
    dataset defines it, else ``dataset[i]`` per index; then ``collate_fn``.

    A sample whose load raises one of ``skip`` is dropped and recorded in ``skipped`` (for
    the last fetch); a batch path that raises one loads its batch again sample by sample, so
    one bad sample does not take the batch with it.
    """

    def __init__(
        self,
        dataset: Any,
        auto_collation: bool,
        collate_fn: Callable[[Any], Any],
        skip: tuple[type[Exception], ...] = (),
    ):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.skip = skip
        self.skipped: list[SkippedSample] = []
        getitems = getattr(dataset, "__getitems__", None)
        self._getitems = getitems if getitems else None
        self._accepts = declared(getitems) if getitems else Declared(False, False)

    def fetch(
        self,
        index: Any,
        seeds: SampleSeeds | None = None,
        allocate: Allocate | None = None,
        batch: int | None = None,
    ) -> Any:
        """The batch (or sample) for ``index``, its random draws from the epoch's ``seeds``,
        its arrays built in ``allocate``'s (None: ordinary memory); ``batch``: its number in
        the epoch, which seeds ``batch_rng()`` while ``collate_fn`` runs."""
        clock = stats.active_clock()
        start = time.perf_counter() if clock is not None else 0.0
        transform_before = clock.transform if clock is not None else 0.0
        self.skipped = []
        if not self.auto_collation:
            data = self._load_one(index, seeds)
        elif self._getitems is not None:
            data = self._load_batch(index, seeds, allocate)
        else:  # each sample with its own generator (sample_rng)
            data = self._load_one_by_one(index, seeds)
        if self.skipped and not data:
            raise EmptyBatch
        began = (start, transform_before)
        return _collate_timed(self.collate_fn, data, allocate, clock, began, (seeds, batch))

    def _load_batch(
        self, indices: Any, seeds: SampleSeeds | None, allocate: Allocate | None
    ) -> Any:
        assert self._getitems is not None
        rngs = None if seeds is None else SampleRngs(seeds, indices)
        try:
            if self._accepts.rngs:
                return call_getitems(self._getitems, indices, rngs, allocate, self._accepts)
            with sample_context(None, seeds=seeds):  # sample_rng(i) for the dataset's loads
                return call_getitems(self._getitems, indices, None, allocate, self._accepts)
        except self.skip:
            return self._load_one_by_one(indices, seeds)

    def _load_one(self, index: Any, seeds: SampleSeeds | None) -> Any:
        try:
            with sample_context(index, seeds=seeds):
                return self.dataset[index]
        except self.skip as error:
            self.skipped.append(skipped_from(error, index, self.dataset))
            raise EmptyBatch from None
        except Exception as error:
            name_sample(error, index, self.dataset)
            raise

    def _load_one_by_one(self, indices: Any, seeds: SampleSeeds | None) -> list[Any]:
        failed: list[tuple[int, Exception]] = []
        rngs = None if seeds is None else SampleRngs(seeds, indices)
        data = load_one_by_one(self.dataset, indices, rngs, self.skip, failed)
        self.skipped.extend(skipped_from(error, i, self.dataset) for i, error in failed)
        return data


class IterableFetcher:
    """Iterable datasets: take the next sample, or the next ``len(index)`` samples as a batch.

    A short final batch is kept unless ``drop_last``; raises StopIteration when the stream ends.
    """

    def __init__(
        self,
        dataset: Any,
        auto_collation: bool,
        collate_fn: Callable[[Any], Any],
        drop_last: bool,
        skip: tuple[type[Exception], ...] = (),
        stream: str = "the stream",
    ):
        self.dataset_iter: Iterator[Any] = iter(dataset)
        self.stream = stream  # how skip reports name this stream
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.ended = False
        self.skip = skip
        self.skipped: list[SkippedSample] = []
        self._drawn = 0  # items taken from the stream, skipped ones included

    def fetch(
        self,
        index: Any,
        seeds: SampleSeeds | None = None,
        allocate: Allocate | None = None,
        batch: int | None = None,
    ) -> Any:
        """The next sample or batch; streams have no sample indices, so ``seeds`` seed only
        ``batch_rng()``, with the batch's number ``batch``, while ``collate_fn`` runs."""
        if self.ended:
            raise StopIteration
        self.skipped = []
        if not self.auto_collation:
            found, sample = self._next_sample()
            if not found:
                raise EmptyBatch
            return _collate_with(self.collate_fn, sample, None, (seeds, batch))
        samples = []
        for _ in index:
            try:
                found, sample = self._next_sample()
            except StopIteration:
                self.ended = True
                break
            if found:
                samples.append(sample)
        if not samples and self.skipped and not self.ended:
            raise EmptyBatch
        if not samples or (self.drop_last and len(samples) < len(index)):
            raise StopIteration
        return _collate_with(self.collate_fn, samples, allocate, (seeds, batch))

    def _next_sample(self) -> tuple[bool, Any]:
        """(True, the stream's next item), or (False, None) if it raised one of ``skip`` (a
        generator ends there; an iterator object may go on)."""
        position = self._drawn
        self._drawn += 1
        try:
            return True, next(self.dataset_iter)
        except self.skip as error:
            where = f"item {position} of {self.stream}"
            self.skipped.append(skipped_from(error, None, None, where))
            return False, None


#: (the epoch's seeds, the batch's number): what seeds ``batch_rng()`` for a collate_fn.
BatchSeed = tuple[SampleSeeds | None, int | None]


def _collate_with(
    collate_fn: Callable[[Any], Any], data: Any, allocate: Allocate | None, seed: BatchSeed
) -> Any:
    """``collate_fn(data)``; ``default_collate`` stacks into ``allocate``'s arrays (a custom
    collate_fn gets the plain call, and its batch is copied where it travels), and draws
    nothing; a custom one runs with ``batch_rng()`` the batch's generator."""
    if collate_fn is default_collate:
        if allocate is None:
            return collate_fn(data)
        return collate(data, collate_fn_map=default_collate_fn_map, allocate=allocate)
    with batch_context(*seed):
        return collate_fn(data)


def _collate_timed(
    collate_fn: Callable[[Any], Any],
    data: Any,
    allocate: Allocate | None,
    clock: stats.StageClock | None,
    began: tuple[float, float],
    seed: BatchSeed,
) -> Any:
    """The collated batch, recording the dataset time and collate time, and the batch's
    marks for the trace; ``began``: when the fetch started and the clock's transform then."""
    if clock is None:
        return _collate_with(collate_fn, data, allocate, seed)
    start, transform_before = began
    fetched = time.perf_counter()
    batch = _collate_with(collate_fn, data, allocate, seed)
    collated = time.perf_counter()
    clock.fetch += fetched - start
    clock.collate += collated - fetched
    clock.marks = (start, fetched, collated, clock.transform - transform_before)
    return batch


def make_fetcher(
    dataset: Any,
    iterable: bool,
    auto_collation: bool,
    collate_fn: Callable[[Any], Any],
    drop_last: bool,
    skip: tuple[type[Exception], ...] = (),
    stream: str = "the stream",
) -> MapFetcher | IterableFetcher:
    """The fetcher for this dataset kind (an iterable fetcher starts the dataset's iterator)."""
    if iterable:
        return IterableFetcher(dataset, auto_collation, collate_fn, drop_last, skip, stream)
    return MapFetcher(dataset, auto_collation, collate_fn, skip)
