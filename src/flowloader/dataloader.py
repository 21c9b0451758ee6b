"""DataLoader: PyTorch's constructor and semantics, batches as NumPy arrays."""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from . import _plan
from ._iter.multi_process import MultiProcessIterator
from ._iter.single_process import SingleProcessIterator
from .dataset import Dataset

T_co = TypeVar("T_co", covariant=True)

__all__ = ["DataLoader"]

# Attributes that define what an epoch contains; PyTorch forbids changing them after __init__.
_FROZEN_ATTRIBUTES = frozenset(
    {"batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers"}
)
# Plan field -> loader attribute; the rest keep PyTorch's public attribute names.
_PRIVATE_ATTRIBUTES = {
    "iterable": "_iterable",
    "multiprocessing_context": "_multiprocessing_context",
}
_PLAN_ATTRIBUTES = {
    f.name: _PRIVATE_ATTRIBUTES.get(f.name, f.name) for f in dataclasses.fields(_plan.LoadPlan)
}


class DataLoader(Generic[T_co]):
    """Iterate over ``dataset`` in batches, in the calling process or with worker processes.

    The arguments, defaults and validation are PyTorch's ``torch.utils.data.DataLoader``'s;
    batches are NumPy arrays (see :func:`flowloader.default_collate`). ``generator`` may be an
    int seed, a ``numpy.random.Generator``, a ``torch.Generator`` or None.
    """

    _initialized = False

    def __init__(
        self,
        dataset: Dataset[T_co] | Any,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Iterable[Any] | None = None,
        batch_sampler: Iterable[list[Any]] | None = None,
        num_workers: int = 0,
        collate_fn: Callable[[Any], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: Any = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ) -> None:
        plan = _plan.resolve(
            dataset,
            batch_size,
            shuffle,
            sampler,
            batch_sampler,
            num_workers,
            collate_fn,
            pin_memory,
            drop_last,
            timeout,
            worker_init_fn,
            multiprocessing_context,
            generator,
            prefetch_factor=prefetch_factor,
            persistent_workers=persistent_workers,
            pin_memory_device=pin_memory_device,
            in_order=in_order,
        )
        for field, attribute in _PLAN_ATTRIBUTES.items():
            object.__setattr__(self, attribute, getattr(plan, field))
        self._IterableDataset_len_called: int | None = None
        self._iterator: Any = None
        self._initialized = True
        self.check_worker_number_rationality()

    def __setattr__(self, name: str, value: Any) -> None:
        if self._initialized and name in _FROZEN_ATTRIBUTES:
            raise ValueError(
                f"{name} attribute should not be set after {type(self).__name__} is initialized"
            )
        super().__setattr__(name, value)

    @property
    def multiprocessing_context(self) -> Any:
        return self._multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, context: Any) -> None:
        self._multiprocessing_context = _plan.resolve_context(context, self.num_workers)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Any:
        return self.batch_sampler if self._auto_collation else self.sampler

    def _plan_snapshot(self) -> _plan.LoadPlan:
        """The loader's current settings, frozen for one iterator."""
        values = {field: getattr(self, attribute) for field, attribute in _PLAN_ATTRIBUTES.items()}
        return _plan.LoadPlan(**values)

    def _get_iterator(self) -> Iterator[Any]:
        plan = self._plan_snapshot()
        if plan.num_workers == 0:
            return SingleProcessIterator(plan, self._IterableDataset_len_called)
        self.check_worker_number_rationality()
        return MultiProcessIterator(plan, self._IterableDataset_len_called)

    def __iter__(self) -> Iterator[Any]:
        """A new pass over the data. With persistent workers, the same iterator is reset and
        its workers are reused (a new one is made if the old one was shut down by an error)."""
        if not (self.persistent_workers and self.num_workers > 0):
            return self._get_iterator()
        if self._iterator is None or self._iterator.closed:
            self._iterator = self._get_iterator()
        else:
            self._iterator.reset(self._plan_snapshot(), self._IterableDataset_len_called)
        return self._iterator

    def __len__(self) -> int:
        if not self._iterable:
            return len(self._index_sampler)
        length = self._IterableDataset_len_called = len(self.dataset)
        if self.batch_size is not None:
            if self.drop_last:
                length = length // self.batch_size
            else:
                length = math.ceil(length / self.batch_size)
        return length

    def check_worker_number_rationality(self) -> None:
        """Warn when more workers are asked for than this process has CPUs."""
        if not self.num_workers:
            return
        cpus = _plan.usable_cpu_count()
        if cpus is None or self.num_workers > cpus:
            warnings.warn(
                f"This DataLoader will create {self.num_workers} worker processes, but this "
                f"process may use {cpus if cpus is not None else 'an unknown number of'} CPUs; "
                "more workers than CPUs usually slows loading down. Consider lowering num_workers.",
                stacklevel=3,
            )
