"""Resolve DataLoader's PyTorch-style arguments into a frozen plan, raising every argument error.

Pure: nothing here starts a process or touches the data. The checks run in PyTorch's order and
raise PyTorch's exception types, so code that handles their errors keeps working.
"""

from __future__ import annotations

import importlib.util
import multiprocessing
import multiprocessing.context
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _output, _seed, resources
from ._skip import check_policy
from ._worker.buffers import BlockPool
from .collate import default_collate, default_convert
from .dataset import is_iterable
from .sampler import BatchSampler, RandomSampler, SequentialSampler, _InfiniteConstantSampler

DEFAULT_PREFETCH_FACTOR = 2


def _no_generator() -> None:
    return None


@dataclass(frozen=True)
class Defaults:
    """What a DataLoader builds where the user passes nothing. ``flowloader.DataLoader`` builds
    its own samplers and NumPy collation, and leaves ``generator=None`` to NumPy's global RNG;
    the PyTorch drop-in builds torch's kinds (flowloader.utils.data)."""

    random_sampler: Callable[..., Any] = RandomSampler
    sequential_sampler: Callable[..., Any] = SequentialSampler
    batch_sampler: Callable[..., Any] = BatchSampler
    collate: Callable[[Any], Any] = default_collate
    convert: Callable[[Any], Any] = default_convert
    # The loader's generator when none is given (called once per loader).
    generator: Callable[[], Any] = _no_generator


NUMPY_DEFAULTS = Defaults()


@dataclass(frozen=True)
class LoadPlan:
    """Everything a DataLoader iterator needs, validated."""

    dataset: Any
    iterable: bool
    batch_size: int | None
    drop_last: bool
    sampler: Any
    batch_sampler: Any
    collate_fn: Callable[[Any], Any]
    generator: Any
    num_workers: int
    prefetch_factor: int | None
    persistent_workers: bool
    timeout: float
    worker_init_fn: Callable[[int], None] | None
    multiprocessing_context: multiprocessing.context.BaseContext | None
    pin_memory: bool
    pin_memory_device: str
    in_order: bool
    output: str = "numpy"
    skip_errors: tuple[type[Exception], ...] = ()
    max_skipped: int | float | None = None
    worker_method: str = "multiprocessing"
    max_worker_restarts: int = 0
    # worker_method="ray": options for the worker actors (num_cpus, resources, ...).
    ray_options: Mapping[str, Any] | None = None
    # num_workers="auto": num_workers is where the epoch starts; the tuner changes it, and
    # worker_method and prefetch_factor where they were left to it.
    auto_workers: bool = False
    auto_method: bool = False
    auto_prefetch: bool = False
    # The loader's own memory, in bytes (workers and batches: _iter/memory.py), and whether
    # the user gave it (then the first batch is measured before any worker starts).
    memory_budget: int = 0
    memory_budget_given: bool = False
    # Thread workers' free batch blocks, the loader's across its epochs (_worker/buffers.py).
    thread_blocks: BlockPool | None = None

    @property
    def auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def collate_to_run(self) -> Callable[[Any], Any]:
        """What the fetchers call: ``collate_fn``, or its NumPy form where the output step
        makes the rest (the drop-in's tensor default_collate with output="torch")."""
        return _output.collate_to_run(self.collate_fn, self.output)

    @property
    def index_sampler(self) -> Any:
        """What the iterator draws from: batches of indices, or single indices."""
        return self.batch_sampler if self.auto_collation else self.sampler


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def resolve_context(context: Any, num_workers: int) -> multiprocessing.context.BaseContext | None:
    """Validate ``multiprocessing_context``: a start-method name or a context object."""
    if context is None:
        return None
    if num_workers == 0:
        raise ValueError(
            "multiprocessing_context can only be used with multi-process loading "
            f"(num_workers > 0), but got num_workers={num_workers}"
        )
    if isinstance(context, str):
        methods = multiprocessing.get_all_start_methods()
        if context not in methods:
            raise ValueError(
                f"multiprocessing_context option should specify a valid start method in "
                f"{methods!r}, but got multiprocessing_context={context!r}"
            )
        return multiprocessing.get_context(context)
    if not isinstance(context, multiprocessing.context.BaseContext):
        raise TypeError(
            "multiprocessing_context option should be a valid context object or a string "
            f"specifying the start method, but got multiprocessing_context={context!r}"
        )
    return context


def _check_workers(
    num_workers: Any, timeout: Any, prefetch_factor: Any, persistent_workers: bool
) -> int | None:
    """Validate the worker arguments; return the effective prefetch_factor."""
    if num_workers == AUTO:
        num_workers = 1  # the tuner starts workers when they pay: check as for workers
    elif not _is_int(num_workers):
        raise TypeError(
            f"num_workers should be an int or {AUTO!r}, but got num_workers={num_workers!r}"
        )
    if num_workers < 0:
        raise ValueError(
            "num_workers option should be non-negative; use num_workers=0 to disable "
            f"multiprocessing (load in the main process), but got num_workers={num_workers}"
        )
    if timeout < 0:
        raise ValueError(f"timeout option should be non-negative, but got timeout={timeout}")
    if num_workers == 0 and prefetch_factor is not None:
        raise ValueError(
            "prefetch_factor only applies to multi-process loading: set num_workers > 0, or "
            f"leave prefetch_factor=None (got prefetch_factor={prefetch_factor})"
        )
    if num_workers > 0 and prefetch_factor is None:
        prefetch_factor = DEFAULT_PREFETCH_FACTOR
    elif prefetch_factor is not None and (not _is_int(prefetch_factor) or prefetch_factor < 1):
        # PyTorch accepts 0 and then yields an empty epoch; refusing it avoids silent data loss.
        raise ValueError(
            "prefetch_factor should be a positive integer, but got "
            f"prefetch_factor={prefetch_factor!r}"
        )
    if persistent_workers and num_workers == 0:
        raise ValueError("persistent_workers=True needs num_workers > 0")
    return prefetch_factor


WORKER_METHODS = ("multiprocessing", "thread", "ray")
AUTO = "auto"  # num_workers="auto": the loader tunes its worker count
# Options that would let Ray restart actors or re-run tasks itself: the Epoch alone decides
# what is loaded again (max_worker_restarts), or a batch could come twice.
RAY_RETRY_OPTIONS = ("max_restarts", "max_task_retries", "max_retries")
# Options the loader's actors cannot take: calls run one at a time and in order (replies,
# deaths and epochs stay in order), each worker is its own actor, and actors end with the
# loader (or with the process that made it).
RAY_FIXED_OPTIONS = (
    "max_concurrency",
    "concurrency_groups",
    "allow_out_of_order_execution",
    "lifetime",
    "name",
    "namespace",
    "get_if_exists",
)


def _auto_knobs(
    auto_workers: bool, worker_method: Any, prefetch_factor: Any, context: Any
) -> tuple[Any, bool, Any, bool]:
    """(worker_method, whether the tuner chooses it, prefetch_factor, whether the tuner
    tunes it). With num_workers="auto", both are "auto" unless given (or, for the method,
    a multiprocessing_context is given); "auto" needs num_workers="auto"."""
    for name, value in (("worker_method", worker_method), ("prefetch_factor", prefetch_factor)):
        if value == AUTO and not auto_workers:
            raise ValueError(
                f"{name}={AUTO!r} needs num_workers={AUTO!r}: the tuner sets it with the "
                "worker count"
            )
    if worker_method is None:
        worker_method = AUTO if auto_workers and context is None else "multiprocessing"
    auto_method = worker_method == AUTO
    auto_prefetch = auto_workers and prefetch_factor in (None, AUTO)
    # The tuner starts from worker processes and prefetch_factor's default.
    return (
        "multiprocessing" if auto_method else worker_method,
        auto_method,
        None if prefetch_factor == AUTO else prefetch_factor,
        auto_prefetch,
    )


def _check_worker_method(
    worker_method: Any, context: Any, max_worker_restarts: Any, num_workers: int
) -> None:
    if worker_method not in WORKER_METHODS:
        raise ValueError(
            f"worker_method should be one of {WORKER_METHODS}, but got "
            f"worker_method={worker_method!r}"
        )
    if worker_method != "multiprocessing" and context is not None:
        raise ValueError(
            "multiprocessing_context only applies to worker_method='multiprocessing', but got "
            f"multiprocessing_context={context!r} with worker_method={worker_method!r}"
        )
    if not _is_int(max_worker_restarts):
        raise TypeError(
            "max_worker_restarts should be an int, but got "
            f"max_worker_restarts={max_worker_restarts!r}"
        )
    if max_worker_restarts < 0:
        raise ValueError(
            f"max_worker_restarts should be non-negative, but got {max_worker_restarts}"
        )
    if max_worker_restarts and num_workers == 0:
        raise ValueError(
            "max_worker_restarts only applies to loading with workers (num_workers > 0), but "
            f"got max_worker_restarts={max_worker_restarts} with num_workers=0"
        )


def _check_ray_options(ray_options: Any, worker_method: str) -> dict[str, Any] | None:
    """``ray_options`` only with Ray workers, as a mapping without Ray's own retries; Ray
    itself must be installed (the core never imports it)."""
    if ray_options is not None and worker_method != "ray":
        raise ValueError(
            "ray_options only applies to worker_method='ray', but got "
            f"ray_options={ray_options!r} with worker_method={worker_method!r}"
        )
    if worker_method != "ray":
        return None
    if importlib.util.find_spec("ray") is None:
        raise ImportError("worker_method='ray' needs Ray installed: pip install 'flowloader[ray]'")
    if ray_options is None:
        return None
    if not isinstance(ray_options, Mapping):
        raise TypeError(
            f"ray_options should be a dict of Ray actor options, but got {ray_options!r}"
        )
    retries = [key for key in RAY_RETRY_OPTIONS if ray_options.get(key)]
    if retries or "max_retries" in ray_options:
        raise ValueError(
            f"ray_options may not set {', '.join(retries or ['max_retries'])}: the loader "
            "decides what is loaded again (every sample exactly once); use "
            "max_worker_restarts instead"
        )
    fixed = [key for key in RAY_FIXED_OPTIONS if key in ray_options]
    if fixed:
        raise ValueError(
            f"ray_options may not set {', '.join(fixed)}: each worker is one actor of its "
            "own that runs its calls one at a time, in order, and ends with the loader"
        )
    return dict(ray_options)


def _check_iterable_options(shuffle: Any, sampler: Any, batch_sampler: Any) -> None:
    if shuffle not in {False, None}:
        raise ValueError(
            "DataLoader with IterableDataset: expected unspecified shuffle option, but got "
            f"shuffle={shuffle!r} (an IterableDataset orders its own samples)"
        )
    if sampler is not None:
        raise ValueError(
            "DataLoader with IterableDataset: expected unspecified sampler option, but got "
            f"sampler={sampler!r}"
        )
    if batch_sampler is not None:
        raise ValueError(
            "DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
            f"got batch_sampler={batch_sampler!r}"
        )


def resolve(arguments: Mapping[str, Any], defaults: Defaults = NUMPY_DEFAULTS) -> LoadPlan:
    """Validate DataLoader's arguments (PyTorch's rules and order) and build the plan.

    ``arguments``: every parameter of ``DataLoader.__init__`` by name, defaults filled in
    (the signature, with its defaults, is written only there). ``defaults``: what to build
    for the arguments left out.
    """
    dataset, batch_size, shuffle = (arguments[k] for k in ("dataset", "batch_size", "shuffle"))
    sampler, batch_sampler = arguments["sampler"], arguments["batch_sampler"]
    num_workers, timeout, drop_last = (
        arguments[k] for k in ("num_workers", "timeout", "drop_last")
    )
    prefetch_factor, persistent_workers = (
        arguments["prefetch_factor"],
        arguments["persistent_workers"],
    )
    collate_fn, output = arguments["collate_fn"], arguments["output"]
    skip_errors, max_skipped = arguments["skip_errors"], arguments["max_skipped"]
    multiprocessing_context, generator = (
        arguments["multiprocessing_context"],
        arguments["generator"],
    )
    auto_workers = num_workers == AUTO
    worker_method, auto_method, prefetch_factor, auto_prefetch = _auto_knobs(
        auto_workers, arguments["worker_method"], prefetch_factor, multiprocessing_context
    )
    prefetch_factor = _check_workers(num_workers, timeout, prefetch_factor, persistent_workers)
    if auto_workers:
        num_workers = 0
    _output.check_output(output)
    skip_types = check_policy(skip_errors, max_skipped)
    _check_worker_method(
        worker_method,
        multiprocessing_context,
        arguments["max_worker_restarts"],
        1 if auto_workers else num_workers,
    )
    ray_options = _check_ray_options(arguments["ray_options"], worker_method)
    context = resolve_context(multiprocessing_context, 1 if auto_workers else num_workers)
    generator = _seed.resolve_generator(generator)
    if generator is None:
        generator = defaults.generator()

    iterable = is_iterable(dataset)  # torch's IterableDataset too
    if iterable and auto_workers:
        raise ValueError(
            f"num_workers={AUTO!r} needs a map-style dataset: a stream is split by the "
            "number of workers, which the tuner changes mid-epoch; give a number"
        )
    if iterable:
        _check_iterable_options(shuffle, sampler, batch_sampler)
    else:
        shuffle = bool(shuffle)

    if sampler is not None and shuffle:
        raise ValueError("sampler option is mutually exclusive with shuffle")
    if batch_sampler is not None:
        if batch_size != 1 or shuffle or sampler is not None or drop_last:
            raise ValueError(
                "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                "and drop_last"
            )
        batch_size, drop_last = None, False
    elif batch_size is None and drop_last:
        raise ValueError(
            "batch_size=None option disables auto-batching and is mutually exclusive with drop_last"
        )

    if sampler is None:
        if iterable:
            sampler = _InfiniteConstantSampler()
        elif shuffle:
            sampler = defaults.random_sampler(dataset, generator=generator)
        else:
            sampler = defaults.sequential_sampler(dataset)
    if batch_size is not None and batch_sampler is None:
        batch_sampler = defaults.batch_sampler(sampler, batch_size, drop_last)

    if collate_fn is None:
        collate_fn = defaults.collate if batch_sampler is not None else defaults.convert

    return LoadPlan(
        dataset=dataset,
        iterable=iterable,
        batch_size=batch_size,
        drop_last=drop_last,
        sampler=sampler,
        batch_sampler=batch_sampler,
        collate_fn=collate_fn,
        generator=generator,
        num_workers=int(num_workers),
        prefetch_factor=prefetch_factor,
        persistent_workers=persistent_workers,
        timeout=timeout,
        worker_init_fn=arguments["worker_init_fn"],
        multiprocessing_context=context,
        pin_memory=arguments["pin_memory"],
        pin_memory_device=arguments["pin_memory_device"],
        in_order=arguments["in_order"],
        output=output,
        skip_errors=skip_types,
        max_skipped=max_skipped,
        worker_method=worker_method,
        max_worker_restarts=int(arguments["max_worker_restarts"]),
        ray_options=ray_options,
        auto_workers=auto_workers,
        auto_method=auto_method,
        auto_prefetch=auto_prefetch,
        memory_budget=resolve_memory_budget(arguments["memory_budget"]),
        memory_budget_given=arguments["memory_budget"] is not None,
        thread_blocks=BlockPool(),
    )


DEFAULT_MEMORY_FRACTION = 0.5  # of the machine's or the cgroup's memory, as tf.data's RAM budget


def resolve_memory_budget(budget: Any) -> int:
    """``memory_budget`` in bytes: an int is bytes, a float in (0, 1] a fraction of the
    memory this process may use (resources.memory_limit), None half of it."""
    if budget is None:
        budget = DEFAULT_MEMORY_FRACTION
    if isinstance(budget, bool) or not isinstance(budget, (int, float)):
        raise TypeError(
            "memory_budget should be a number of bytes (int) or a fraction of the memory "
            f"(float in (0, 1]), but got memory_budget={budget!r}"
        )
    if not 0 < budget < float("inf"):  # NaN too
        raise ValueError(f"memory_budget should be above 0, but got memory_budget={budget}")
    if isinstance(budget, float) and budget <= 1:
        return max(int(budget * resources.memory_limit()), 1)
    return int(budget)
