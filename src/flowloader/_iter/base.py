"""What every DataLoader iterator shares: the index stream, the base seed, the yield count."""

from __future__ import annotations

import copy
import time
import warnings
from typing import Any

from .. import _seed, stats
from .._plan import LoadPlan


class BaseIterator:
    """One pass over a DataLoader's data, as the plan describes it."""

    def __init__(self, plan: LoadPlan, length_hint: int | None) -> None:
        self._plan = plan
        self._start_epoch(plan, length_hint)
        if plan.pin_memory:
            warnings.warn(
                "pin_memory=True has no effect: batches are NumPy arrays, and page-locked "
                "memory needs torch tensors on a machine with an accelerator.",
                stacklevel=4,
            )

    def _start_epoch(self, plan: LoadPlan, length_hint: int | None) -> None:
        self._plan = plan
        # Drawn every epoch, with or without workers, so that the sampler's draws (which may
        # share the generator) are the same whatever num_workers and persistent_workers are.
        self._base_seed = _seed.draw_seed(plan.generator)
        self._sampler_iter = iter(plan.index_sampler)
        self._num_yielded = 0
        self._length_hint = length_hint
        self._stats = stats.LoaderStats(num_workers=plan.num_workers)
        self._started_at = time.perf_counter()
        self._cpu_at_start = time.process_time()
        self._batches = 0
        self._waited_s = 0.0

    def stats(self) -> stats.LoaderStats:
        """Where the time went since this epoch started (see :mod:`flowloader.stats`)."""
        snapshot = copy.deepcopy(self._stats)
        snapshot.batches = self._batches
        snapshot.stage_s["wait"] = self._waited_s
        snapshot.elapsed_s = time.perf_counter() - self._started_at
        snapshot.main_cpu_s = time.process_time() - self._cpu_at_start
        snapshot.in_flight = self._in_flight()
        return snapshot

    def _in_flight(self) -> int:
        return 0

    def _absorb_stages(self, stages: dict[str, float] | None) -> None:
        """Add a process's stage clock readings (read = dataset time not marked transform)."""
        if not stages:
            return
        totals = self._stats.stage_s
        transform = stages.get("transform", 0.0)
        totals["read"] += max(stages.get("fetch", 0.0) - transform, 0.0)
        totals["transform"] += transform
        totals["collate"] += stages.get("collate", 0.0)
        totals["transport"] += stages.get("transport", 0.0)
        self._stats.worker_busy_s += stages.get("task", 0.0)

    def _count_batch(self, waited_s: float) -> None:
        self._batches += 1
        self._waited_s += waited_s
        if self._stats.first_batch_s is None:
            self._stats.first_batch_s = time.perf_counter() - self._started_at

    def __iter__(self) -> BaseIterator:
        return self

    def __len__(self) -> int:
        return len(self._plan.index_sampler)

    def __next__(self) -> Any:
        if not stats.enabled:
            data = self._next_data()
        else:
            started = time.perf_counter()
            data = self._next_data()
            self._count_batch(time.perf_counter() - started)
        self._num_yielded += 1
        self._warn_if_past_reported_length()
        return data

    def _next_data(self) -> Any:
        raise NotImplementedError

    def _next_index(self) -> Any:
        return next(self._sampler_iter)

    def _warn_if_past_reported_length(self) -> None:
        reported = self._length_hint
        if self._plan.iterable and reported is not None and self._num_yielded > reported:
            hint = (
                " With workers, each worker must read its own shard (see get_worker_info())."
                if self._plan.num_workers > 0
                else ""
            )
            warnings.warn(
                f"Length of IterableDataset {self._plan.dataset!r} was reported to be "
                f"{reported} (when accessing len(dataloader)), but {self._num_yielded} "
                f"samples have been fetched.{hint}",
                stacklevel=3,
            )

    def __getstate__(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} cannot be pickled")
