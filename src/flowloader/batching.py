"""The batch contract: what a batch-aware dataset's ``__getitems__`` receives, and what it may
return. Everything the loader and the dataset wrappers need to honour it lives here.

A map-style dataset may load a whole batch in one call::

    def __getitems__(self, indices, rngs=None, allocate=None) -> list | CollatedSamples: ...

PyTorch calls ``__getitems__(indices)``; the two other parameters are flowloader's, and each
is passed only when the method declares it (by name), so a PyTorch dataset works unchanged.

``indices``
    the batch's dataset indices, in sampler order.
``rngs``
    the batch's per-sample generators: ``rngs[k]`` belongs to ``indices[k]``, and is the
    generator that sample gets on every path (one by one or batched, any ``num_workers``,
    threads or processes, after a resume). Draw every random choice of sample k from it.
``allocate``
    ``allocate(shape, dtype) -> numpy.ndarray``: an uninitialised array for the batch's
    output. In a worker process it lies in the shared memory the batch travels in, so
    filling it is the batch's only copy; in a worker thread, for batches of 32 MiB or more,
    in a block reused once the consumer drops the batch; elsewhere it is ``numpy.empty``.

It returns a list of samples, which ``collate_fn`` collates as usual, or a
:class:`CollatedSamples`: the batch's columns already stacked (best written into arrays from
``allocate``), which ``default_collate`` hands on as they are, and which any other
``collate_fn`` sees as an ordinary sequence of samples.

A wrapper (``Subset``, ``StackDataset``) passes a batch on to the dataset it wraps with
:func:`fetch_many`; :func:`load_one_by_one` is the fallback every batch path shares.

A ``collate_fn`` that draws (MixUp, CutMix) draws from :func:`batch_rng`: while the loader
collates a batch it is that batch's own generator, Philox keyed by (epoch seed, the batch's
number in the epoch), so the draw is the same for any ``num_workers``, worker method,
``in_order`` and after a resume (:func:`batch_generator`).
"""

from __future__ import annotations

import collections.abc
import contextvars
import inspect
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _pages
from .errors import name_sample
from .randomness import SampleRngs, SampleSeeds, sample_context

__all__ = [
    "Allocate",
    "CollatedSamples",
    "allocate_empty",
    "batch_context",
    "batch_generator",
    "batch_rng",
    "fetch_many",
    "load_one_by_one",
]

#: ``allocate(shape, dtype)`` -> an uninitialised array for a batch's output.
Allocate = Callable[[tuple[int, ...], Any], np.ndarray]


_MASK64 = (1 << 64) - 1
# A batch's Philox key is (epoch seed, this bit | its number); a sample's is (epoch seed, its
# index), and indices lie below 2**63: no batch has a sample's generator.
_BATCH_TAG = 1 << 63


def batch_generator(epoch_seed: int, batch: int) -> np.random.Generator:
    """The generator of batch number ``batch`` of the epoch seeded ``epoch_seed`` (the
    loader's :class:`~flowloader.randomness.SampleSeeds`): Philox keyed by (epoch seed, the
    top bit | ``batch``), never a sample's generator (theirs are keyed by indices below
    2**63).

    The loader numbers an epoch's batches in its order from 0, each whatever worker loads
    it, whenever it arrives, and after a resume (batch k of a resumed epoch is batch k of the
    uninterrupted run), counting batches that ``skip_errors`` passed over. Where a resume
    regroups the rest of an epoch into another batch size, each later batch is numbered by
    the place of its first sample in the epoch's order (what earlier runs read, plus k times
    the new batch size): no earlier batch of the epoch has that number, and every resume of
    that run in the same batch size gives it again."""
    batch = int(batch)
    if not 0 <= batch < _BATCH_TAG:
        raise ValueError(f"a batch number lies in [0, 2**63), got {batch}")
    key = np.array([int(epoch_seed) & _MASK64, _BATCH_TAG | batch], np.uint64)
    return np.random.Generator(np.random.Philox(key=key))


class _Collating:
    """What :func:`batch_rng` answers from: the batch being collated and its generator
    (made at the first ask, then continued by every later ask)."""

    __slots__ = ("batch", "generator", "seeds")

    def __init__(self, seeds: SampleSeeds, batch: int) -> None:
        self.seeds, self.batch = seeds, batch
        self.generator: np.random.Generator | None = None

    def current(self) -> np.random.Generator:
        if self.generator is None:
            self.generator = batch_generator(self.seeds.epoch_seed, self.batch)
        return self.generator


_collating: contextvars.ContextVar[_Collating | None] = contextvars.ContextVar(
    "flowloader_collating", default=None
)


class batch_context:
    """Within the block, :func:`batch_rng` is the generator of batch number ``batch`` of the
    epoch whose samples draw from ``seeds`` (:func:`batch_generator`). The loader enters it
    around ``collate_fn`` (a ``collate_fn`` other than ``default_collate``); with ``seeds``
    or ``batch`` None (no epoch seed, or no number), :func:`batch_rng` is None within."""

    __slots__ = ("collating", "token")

    def __init__(self, seeds: SampleSeeds | None, batch: int | None) -> None:
        self.collating = None if seeds is None or batch is None else _Collating(seeds, batch)

    def __enter__(self) -> None:
        self.token = _collating.set(self.collating)

    def __exit__(self, *exc: object) -> None:
        _collating.reset(self.token)


def batch_rng() -> np.random.Generator | None:
    """The generator of the batch being collated (the same one for every ask during that
    collate): what a random ``collate_fn`` draws from, as :func:`~flowloader.sample_rng` is
    a sample's. None outside the loader's collate step: then draw from your own generator or
    NumPy's global one."""
    collating = _collating.get()
    return None if collating is None else collating.current()


def allocate_empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """The ``allocate`` outside worker processes: ``numpy.empty``, on pages of ordinary size
    from 32 MiB on (_pages.py)."""
    return _pages.empty(shape, dtype)


class CollatedSamples(collections.abc.Sequence):
    """Samples that a dataset's ``__getitems__`` has already stacked into columns.

    ``default_collate`` returns the columns as they are (the list it would have built from
    tuple samples) instead of taking the batch apart and stacking it again. Any other
    ``collate_fn`` sees an ordinary sequence: ``sample_fn(i)`` builds sample ``i``.
    """

    def __init__(self, columns: tuple[Any, ...], sample_fn: Callable[[int], Any]) -> None:
        self.columns = columns
        self._sample_fn = sample_fn

    def __len__(self) -> int:
        return len(self.columns[0])

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self._sample_fn(i) for i in range(len(self))[index]]
        return self._sample_fn(range(len(self))[index])

    def collated(self) -> list[Any]:
        return list(self.columns)


class CollatedRecords(CollatedSamples):
    """Dict samples (a table's rows) already gathered into named columns: ``default_collate``
    returns the dict of columns as it would have built it from the rows; any other
    ``collate_fn`` sees the rows, as dicts."""

    def __init__(self, columns: dict[str, Any]) -> None:
        self.names = list(columns)
        super().__init__(tuple(columns.values()), self._row)

    def _row(self, k: int) -> dict[str, Any]:
        return {name: column[k] for name, column in zip(self.names, self.columns, strict=True)}

    def collated(self) -> dict[str, Any]:  # type: ignore[override]
        return dict(zip(self.names, self.columns, strict=True))


@dataclass(frozen=True)
class Declared:
    """Which of the contract's optional parameters a ``__getitems__`` declares."""

    rngs: bool
    allocate: bool


_DECLARED: weakref.WeakKeyDictionary[Callable[..., Any], Declared] = weakref.WeakKeyDictionary()


def declared(getitems: Callable[..., Any]) -> Declared:
    """What ``getitems`` accepts, read from its signature once per function. The cache holds
    its functions weakly: a per-instance ``__getitems__`` (a closure or a partial holding its
    dataset) must not keep the dataset alive once its loader is gone."""
    function = getattr(getitems, "__func__", getitems)
    try:
        found = _DECLARED.get(function)
    except TypeError:  # unhashable, or no weak reference to it: read it every time
        return _read_declared(function)
    if found is None:
        found = _DECLARED[function] = _read_declared(function)
    return found


def _read_declared(function: Callable[..., Any]) -> Declared:
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return Declared(False, False)
    return Declared("rngs" in parameters, "allocate" in parameters)


def call_getitems(
    getitems: Callable[..., Any],
    indices: Sequence[int],
    rngs: Sequence[Any] | None,
    allocate: Allocate | None,
    accepts: Declared | None = None,
) -> Any:
    """``getitems(indices, ...)`` with the optional parameters it declares (``accepts``:
    ``declared(getitems)``, for a caller that keeps it)."""
    if accepts is None:
        accepts = declared(getitems)
    if not (accepts.rngs or accepts.allocate):
        return getitems(indices)
    options: dict[str, Any] = {}
    if accepts.rngs:
        options["rngs"] = rngs
    if accepts.allocate:
        options["allocate"] = allocate or allocate_empty
    return getitems(indices, **options)


def fetch_many(
    dataset: Any,
    indices: list,
    rngs: Sequence[Any] | None = None,
    allocate: Allocate | None = None,
) -> Any:
    """The samples at ``indices``: ``dataset.__getitems__`` when it has one (length-checked),
    else one by one; sample ``indices[k]`` draws from ``rngs[k]``."""
    getitems = getattr(dataset, "__getitems__", None)
    if not callable(getitems):
        return load_one_by_one(dataset, indices, rngs)
    items = call_getitems(getitems, indices, rngs, allocate)
    if len(items) != len(indices):
        raise ValueError(
            f"Nested dataset's output size mismatch. Expected {len(indices)}, got "
            f"{len(items)}: {type(dataset).__name__}.__getitems__ returned {len(items)} samples "
            f"for {len(indices)} indices"
        )
    return items


def load_one_by_one(
    dataset: Any,
    indices: Sequence[int],
    rngs: Sequence[Any] | None = None,
    skip: tuple[type[Exception], ...] = (),
    skipped: list[tuple[int, Exception]] | None = None,
) -> list[Any]:
    """``[dataset[i] for i in indices]``, each load inside its own sample context (with
    ``rngs[k]`` when given): what a batch path falls back to when it cannot take the batch
    whole. A load that raises one of ``skip`` is left out and appended to ``skipped`` as
    (index, error)."""
    samples = []
    for k, i in enumerate(indices):
        if isinstance(rngs, SampleRngs):  # lazily: only a load that draws makes its generator
            context = sample_context(rngs.indices[k], seeds=rngs.seeds)
        else:
            context = sample_context(i, None if rngs is None else rngs[k])
        with context:
            try:
                samples.append(dataset[i])
            except skip as error:
                assert skipped is not None
                skipped.append((i, error))
            except Exception as error:
                name_sample(error, i, dataset)
                raise
    return samples


def overrides_getitem(dataset: Any, base: type) -> bool:
    """True if ``dataset``'s class overrides ``base.__getitem__`` but not its batch method:
    then ``base``'s ``__getitems__`` would bypass the override, so it loads one by one."""
    cls: Any = type(dataset)
    parent: Any = base
    return cls.__getitem__ is not parent.__getitem__ and cls.__getitems__ is parent.__getitems__
