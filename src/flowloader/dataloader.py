"""DataLoader: PyTorch's constructor and semantics, batches as NumPy arrays."""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from . import _plan, _state, order, resources
from ._iter.iterator import DataLoaderIterator
from ._iter.tuning import WorkerTuner
from ._warn import warn_at_user
from .dataset import Dataset
from .distributed import duplicated_across_ranks, world_or_single

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
    "auto_workers": "_auto_workers",
    "memory_budget": "_memory_budget",
    "memory_budget_given": "_memory_budget_given",
    "auto_method": "_auto_method",
    "auto_prefetch": "_auto_prefetch",
    "thread_blocks": "_thread_blocks",
}
_PLAN_ATTRIBUTES = {
    f.name: _PRIVATE_ATTRIBUTES.get(f.name, f.name) for f in dataclasses.fields(_plan.LoadPlan)
}


class DataLoader(Generic[T_co]):
    """Iterate over ``dataset`` in batches, in the calling process or with worker processes.

    The arguments, defaults and validation are PyTorch's ``torch.utils.data.DataLoader``'s;
    batches are NumPy arrays (see :func:`flowloader.default_collate`). ``generator`` may be an
    int seed, a ``numpy.random.Generator``, a ``torch.Generator`` or None. Our addition
    ``output="torch"`` hands out torch tensors sharing the arrays' memory (and makes
    ``pin_memory=True`` pin them where CUDA is available); ``output="jax"`` JAX arrays.

    ``skip_errors`` (an exception type or a tuple of them; ``Exception`` for all) drops the
    samples whose loading raises one of them from their batch, with a warning and a record
    in ``iterator.stats().skipped``; ``max_skipped`` caps them (a count, or a fraction of the
    samples seen so far), past which ``TooManySkippedError`` lists them. Batches stay the same
    for any ``num_workers``, and resuming from ``state_dict()`` stays exact.

    ``worker_method="thread"`` (PyTorch's spelling; ``"multiprocessing"`` is the default,
    ``"auto"`` with ``num_workers="auto"``)
    runs the ``num_workers`` workers as threads of this process: batches are handed over
    without shared memory or pickling, and come out exactly as with processes. They gain where
    loading releases the GIL (image decoding, NumPy) or on free-threaded Python; see
    docs/design/epoch.md. ``max_worker_restarts=N`` replaces a worker that dies (killed,
    out of memory, a crash in native code) up to N times per epoch, loading its batches
    again, so every sample still comes once and in order; past N, ``WorkerCrashedError``.

    ``worker_method="ray"`` (``pip install "flowloader[ray]"``) runs the workers as Ray
    actors on the cluster this process is connected to (a local Ray instance if none),
    with ``ray_options`` passed to the actors (``num_cpus``, ``resources``, a scheduling
    strategy, a ``runtime_env``); batches come through Ray's object store, the same as with
    processes. See "When one machine is not enough" in the README.

    ``memory_budget`` (bytes, or a fraction of the memory this process may use; default half)
    bounds the loader's own memory: its workers' memory as the kernel counts it (USS: the
    pages a worker adds, not its share of its parent's) and its batches in shared memory, in
    flight or pooled. When they would exceed it, fewer batches are kept in flight (with one
    warning), and ``num_workers="auto"`` starts fewer workers; a budget that cannot hold one
    batch and one worker is a ``MemoryBudgetError``. Batches the loop keeps are reported
    beside the budget (one warning when they alone pass it). Given explicitly, the first
    batch is loaded in this process and measured before any worker starts.
    ``iterator.stats().memory`` reports the budget, the peak and the parts.
    """

    _initialized = False
    # Set from the resolved plan in __init__ (PyTorch's public attribute names).
    dataset: Any
    batch_size: int | None
    drop_last: bool
    sampler: Any
    batch_sampler: Any
    collate_fn: Callable[[Any], Any]
    generator: Any
    num_workers: int  # or "auto" (then _auto_workers)
    _auto_workers: bool
    prefetch_factor: int | None  # or "auto"
    persistent_workers: bool
    timeout: float
    worker_init_fn: Callable[[int], None] | None
    pin_memory: bool
    pin_memory_device: str
    in_order: bool
    output: str
    skip_errors: tuple[type[Exception], ...]
    max_skipped: int | float | None
    worker_method: str
    max_worker_restarts: int
    ray_options: dict[str, Any] | None
    memory_budget: int | float | None  # as given (frameworks that rebuild a loader pass it on)
    _memory_budget: int  # in bytes
    _memory_budget_given: bool
    _auto_method: bool
    _auto_prefetch: bool
    _iterable: bool

    def __init__(
        self,
        dataset: Dataset[T_co] | Any,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Iterable[Any] | None = None,
        batch_sampler: Iterable[list[Any]] | None = None,
        num_workers: int | str = 0,
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
        output: str = "numpy",
        skip_errors: type[Exception] | tuple[type[Exception], ...] | None = None,
        max_skipped: int | float | None = None,
        worker_method: str | None = None,
        max_worker_restarts: int = 0,
        ray_options: dict[str, Any] | None = None,
        memory_budget: int | float | None = None,
    ) -> None:
        arguments = dict(locals())  # every parameter by name: the signature is written once
        del arguments["self"]
        plan = _plan.resolve(arguments, self._defaults(output))
        for field, attribute in _PLAN_ATTRIBUTES.items():
            object.__setattr__(self, attribute, getattr(plan, field))
        self.memory_budget = memory_budget
        if plan.auto_workers:  # what the tuner sets reads "auto" (the plan has where it starts)
            object.__setattr__(self, "num_workers", _plan.AUTO)
            if plan.auto_method:
                object.__setattr__(self, "worker_method", _plan.AUTO)
            if plan.auto_prefetch:
                object.__setattr__(self, "prefetch_factor", _plan.AUTO)
        self._IterableDataset_len_called: int | None = None
        self._iterator: Any = None
        self._epochs_started = 0
        self._handed_epoch: int | None = None  # the epoch last handed to sampler and dataset
        # The latest epoch's position, kept after its iterator is gone (see state_dict).
        self._last_position: _state.Position | None = None
        self._resume: dict[str, Any] | None = None
        self._ranks_checked = False
        self._tuner: WorkerTuner | None = None
        self._initialized = True
        self.check_worker_number_rationality()

    def _defaults(self, output: str) -> _plan.Defaults:
        """What to build for the arguments left out (the PyTorch drop-in builds torch's)."""
        return _plan.NUMPY_DEFAULTS

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
        workers = 1 if self._auto_workers else self.num_workers
        self._multiprocessing_context = _plan.resolve_context(context, workers)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Any:
        return self.batch_sampler if self._auto_collation else self.sampler

    def _plan_snapshot(self) -> _plan.LoadPlan:
        """The loader's current settings, frozen for one iterator."""
        values = {field: getattr(self, attribute) for field, attribute in _PLAN_ATTRIBUTES.items()}
        if values["auto_workers"]:  # each epoch starts where the tuner has got to
            tuner = self._worker_tuner()
            values["num_workers"] = tuner.num_workers
            if values["auto_method"]:
                values["worker_method"] = tuner.method
            if values["auto_prefetch"]:
                values["prefetch_factor"] = tuner.prefetch
        return _plan.LoadPlan(**values)

    def _next_epoch(self) -> tuple[int, dict[str, Any] | None]:
        """The number of the epoch about to start, handed to the sampler and the dataset (the
        workers get it with each task), and the state to resume it from, if any. The number
        is a resumed state's; else one given to the sampler's or the dataset's ``set_epoch``
        since the last epoch began (as PyTorch users call it); else the one after the last."""
        resume, self._resume = self._resume, None
        epoch = int(resume["epoch"]) if resume is not None else self._asked_epoch()
        self._epochs_started = epoch + 1
        order.hand_epoch(self._index_sampler, epoch)
        order.hand_epoch(self.dataset, epoch)
        self._handed_epoch = epoch
        return epoch, resume

    def _asked_epoch(self) -> int:
        """An epoch set on the sampler or the dataset since this loader last handed one out,
        else the next of its own count."""
        handed = 0 if self._handed_epoch is None else self._handed_epoch
        held = {
            "sampler": order.epoch_of(self._index_sampler),
            "dataset": order.epoch_of(self.dataset),
        }
        asked = {who: epoch for who, epoch in held.items() if epoch is not None and epoch != handed}
        if len(set(asked.values())) > 1:
            raise ValueError(
                f"set_epoch gave the sampler epoch {asked['sampler']} and the dataset epoch "
                f"{asked['dataset']}: give both the same epoch, or neither (the DataLoader "
                "counts epochs and hands each to both)"
            )
        return next(iter(asked.values()), self._epochs_started)

    def _worker_tuner(self) -> WorkerTuner:
        """num_workers="auto"'s tuner: one per loader, so that every epoch starts on the
        count it has reached and the probe runs once."""
        if self._tuner is None:
            methods = ("multiprocessing", "thread") if self._auto_method else (self.worker_method,)
            prefetch = (
                _plan.DEFAULT_PREFETCH_FACTOR if self._auto_prefetch else self.prefetch_factor
            )
            self._tuner = WorkerTuner(
                resources.usable_cores(), methods, prefetch or 1, self._auto_prefetch
            )
        return self._tuner

    def _get_iterator(self) -> DataLoaderIterator:
        plan = self._plan_snapshot()
        epoch, resume = self._next_epoch()
        hint = self._IterableDataset_len_called
        if plan.num_workers > 0:
            self.check_worker_number_rationality()
        tuner = self._worker_tuner() if plan.auto_workers else None
        iterator = DataLoaderIterator(plan, hint, epoch, resume, tuner=tuner)
        self._last_position = iterator.position  # a live change of workers keeps it
        return iterator

    def __iter__(self) -> DataLoaderIterator:
        """A new pass over the data. With persistent workers, the same iterator is reset and
        its workers are reused (a new one is made if the old one was shut down by an error)."""
        if not self._ranks_checked:
            self._ranks_checked = True
            self._warn_if_every_rank_loads_everything()
            self._warn_of_cache_reads()
        if not (self.persistent_workers and (self._auto_workers or self.num_workers > 0)):
            return self._get_iterator()
        if self._iterator is None or self._iterator.closed:
            self._iterator = self._get_iterator()
        else:
            epoch, resume = self._next_epoch()
            hint = self._IterableDataset_len_called
            self._iterator.reset(self._plan_snapshot(), hint, epoch, resume)
            self._last_position = self._iterator.position
        return self._iterator

    def state_dict(self) -> dict[str, Any]:
        """Where loading stands, as a small JSON-safe dict (positions and generator states, no
        data). ``load_state_dict`` on a new loader over the same dataset continues from here:
        the rest of this epoch and every later one come out as they would have; ``num_workers``
        may differ. Valid at any point, also between epochs. See docs/design/checkpoint.md."""
        if self._resume is not None:
            return _state.compact(copy.deepcopy(self._resume))
        position = self._last_position
        if position is not None and not position.exhausted:
            return position.state()
        # Between epochs (and before the first): the state describes the next epoch, so the
        # sampler and the dataset are given its number first, as the next iter() would.
        plan = self._plan_snapshot()
        epoch = self._asked_epoch()
        order.hand_epoch(self._index_sampler, epoch)
        order.hand_epoch(self.dataset, epoch)
        return _state.build(
            plan,
            epoch=epoch,
            batches_yielded=0,
            generator=_state.generator_state(plan.generator),
            sampler=_state.sampler_state(plan.index_sampler),
            num_workers=plan.num_workers,
        )

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (from ``state_dict()``) at the next ``iter(loader)``.

        Raises ValueError for a state that does not fit: another sampler, batch size,
        drop_last or state format, or a dataset that changed where the state has read it
        (docs/design/resume.md says what a resume may change). ``state`` may also be the
        fixed-key form that ``flowloader.integrations.dcp.Stateful`` saves
        (``{"version": 3, "state": "<JSON>", ...}``): this rank's part is taken from it.
        """
        if _state.is_fixed_form(state):
            state = _state.from_fixed_form(state, world_or_single()[1])
        before = order.epoch_of(self.dataset)
        if isinstance(state, dict) and isinstance(state.get("epoch"), int):
            order.hand_epoch(self.dataset, state["epoch"])  # its items as in the saved epoch
        try:
            _state.check_resumable(state, self._plan_snapshot())
        except Exception:
            if before is not None:
                order.hand_epoch(self.dataset, before)
            raise
        self._resume = copy.deepcopy(state)

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

    def _warn_if_every_rank_loads_everything(self) -> None:
        """Under torch.distributed with several ranks, a map-style loader whose sampler does
        not split the data by rank hands every rank the same samples: say so, once."""
        world = (
            None if self._iterable else duplicated_across_ranks(self.sampler, self.batch_sampler)
        )
        if world is not None:
            warn_at_user(
                f"torch.distributed runs {world} processes, but this DataLoader's sampler "
                f"({type(self.sampler).__name__}) gives every rank the whole dataset, so each "
                "rank will load the same samples. Pass sampler=DistributedSampler(dataset) "
                "(and call sampler.set_epoch(epoch) every epoch), or use a sampler that splits "
                "the data by rank (give it a true splits_by_rank attribute)."
            )

    def _warn_of_cache_reads(self) -> None:
        """A dataset whose cache cannot hold what the sampler's order jumps between (a table
        read in a full shuffle: its ``cache_warning``) says so once, in this process."""
        ask = None if self._iterable else getattr(self.dataset, "cache_warning", None)
        text = ask(self._index_sampler, self.batch_size) if callable(ask) else None
        if text:
            warn_at_user(text, RuntimeWarning)

    def check_worker_number_rationality(self) -> None:
        """Warn when more workers are asked for than this process has CPUs (torch's text)."""
        if not self.num_workers or self._auto_workers:
            return
        cpus = resources.usable_cores()
        if self.num_workers <= cpus:
            return
        if self.worker_method == "ray":
            return  # the actors run on the cluster's CPUs, not this process's
        kind = "threads" if self.worker_method == "thread" else "processes"
        suggested = (
            f"Our suggested max number of worker in current system is {cpus}, which is smaller "
            "than what this DataLoader is going to create."
        )
        warn_at_user(
            f"This DataLoader will create {self.num_workers} worker {kind} in total. "
            f"{suggested} Please be aware that excessive worker creation might get DataLoader "
            "running slow or even freeze, lower the worker number to avoid potential "
            "slowness/freeze if necessary."
        )
