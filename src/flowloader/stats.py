"""Where a loader's time goes: per-stage timing, batches in flight, worker busy time and the
consumer's data wait, from which to tell whether training is input-bound.

Every process keeps a stage clock. The fetcher times the dataset calls and ``collate_fn``; a
dataset may mark its own transform time with ``with flowloader.stats.stage("transform"):``
(the vision datasets do), and what remains of the dataset time counts as read/decode. Workers
send their totals with each batch; ``iterator.stats()`` returns the sums.

Cost: a few ``perf_counter`` calls per batch (and two per sample where a dataset marks its
transform); ``enabled = False`` turns the clock off (see benchmarks/RESULTS.md).
"""

from __future__ import annotations

import contextvars
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from .timeline import Timeline

__all__ = ["STAGES", "LoaderStats", "enabled", "stage", "trace_batches"]

#: The stages a batch's time is split into (``stats().stage_s``), in order.
STAGES = ("read", "transform", "collate", "transport", "wait")

#: Off: stage() and the loaders' clocks record nothing (for measuring their overhead).
enabled = True

#: The batches an iterator's trace keeps (``stats().write_trace``); 0 records nothing.
trace_batches = 512


class StageClock:
    """Seconds spent per stage in this process since the last ``take()``. The loader's own
    stages are plain attributes (cheaper than a dict on a per-batch path)."""

    __slots__ = (
        "collate",
        "fetch",
        "marks",
        "seconds",
        "stages",
        "task",
        "transform",
        "transport",
    )
    _BUILT_IN = ("fetch", "collate", "transform", "transport", "task")

    def __init__(self) -> None:
        self.fetch = self.collate = self.transform = self.transport = self.task = 0.0
        # The last batch's (fetch start, fetched, collated, transform seconds), for the trace.
        self.marks: tuple[float, float, float, float] | None = None
        self.seconds: dict[str, float] = {}
        self.stages: dict[str, _Stage] = {}

    def add(self, name: str, seconds: float) -> None:
        if name == "transform":
            self.transform += seconds
        else:
            self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def take(self) -> dict[str, float]:
        taken = dict(self.seconds)
        for name in self._BUILT_IN:
            taken[name] = taken.get(name, 0.0) + getattr(self, name)
            setattr(self, name, 0.0)
        self.seconds = {}
        return taken


# The clock of the loader fetching in this thread (a ContextVar: a thread a dataset starts
# does not share the loader's clock, so two threads never race on one).
_clock: contextvars.ContextVar[StageClock | None] = contextvars.ContextVar(
    "flowloader_stage_clock", default=None
)


def active_clock() -> StageClock | None:
    return _clock.get() if enabled else None


def set_clock(clock: StageClock | None) -> StageClock | None:
    """Make ``clock`` the stage clock of this thread's fetches; returns the previous one."""
    previous = _clock.get()
    _clock.set(clock)
    return previous


class _Stage:
    """Times a stage of one clock; reused for every ``with`` (only the outermost of nested
    blocks of the same stage counts, so time is not counted twice)."""

    __slots__ = ("clock", "depth", "name", "start")

    def __init__(self, name: str, clock: StageClock) -> None:
        self.name, self.clock, self.depth, self.start = name, clock, 0, 0.0

    def __enter__(self) -> None:
        self.depth += 1
        if self.depth == 1:
            self.start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.clock.add(self.name, time.perf_counter() - self.start)


class _NoStage:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_STAGE = _NoStage()


def stage(name: str) -> _Stage | _NoStage:
    """Count the time of the ``with`` block as stage ``name`` (e.g. "transform")."""
    clock = _clock.get() if enabled else None
    if clock is None:
        return _NO_STAGE
    timer = clock.stages.get(name)
    if timer is None:
        timer = clock.stages[name] = _Stage(name, clock)
    return timer


def gil_disabled() -> bool:
    """True on a free-threaded CPython (3.13t and later) running without its GIL."""
    is_enabled = getattr(sys, "_is_gil_enabled", None)
    return is_enabled is not None and not is_enabled()


@dataclass
class LoaderStats:
    """Totals for one iterator since it started (or since its epoch started)."""

    batches: int = 0
    elapsed_s: float = 0.0
    first_batch_s: float | None = None
    stage_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    in_flight: int = 0
    in_flight_total: int = 0  # summed over arriving batches, for the mean
    num_workers: int = 0
    worker_busy_s: float = 0.0
    worker_cpu_s: float = 0.0
    main_cpu_s: float = 0.0
    # Samples dropped under the DataLoader's skip_errors policy, in sampler order
    # (flowloader._skip.SkippedSample: index, path, error).
    skipped: list = field(default_factory=list)
    # Workers that died and were replaced this epoch (max_worker_restarts).
    worker_restarts: int = 0
    # For a flowloader.Mixture: the samples each source gave the consumer (source name ->
    # count), counted from the batches handed out; None for any other dataset.
    sources: dict[str, int] | None = None
    # "process" or "thread" workers ("" without workers), and whether this Python runs
    # without the GIL (free-threaded CPython), where thread workers use every core.
    worker_method: str = ""
    free_threaded: bool = field(default_factory=gil_disabled)
    # num_workers="auto": each decision of the tuner (at_s, num_workers, reason, measured).
    tuning: list[dict[str, Any]] = field(default_factory=list)
    # memory_budget, in bytes (_iter/memory.py): the budget, the peak of the loader's memory,
    # the largest batch, and the parts at the last measurement: workers_bytes, batches_bytes
    # (in flight and pooled), caches_bytes (the dataset's caches in this process), and beside
    # the budget, loop_bytes in loop_batches (held).
    memory: dict[str, int] | None = None
    # The iterator's recent history (the last ``trace_batches`` batches), for write_trace.
    timeline: Timeline | None = field(default=None, repr=False, compare=False)

    def write_trace(self, path: str | os.PathLike[str]) -> None:
        """Write the loader's recent history to ``path`` as a Chrome trace (JSON; open it in
        Perfetto or chrome://tracing, beside a torch.profiler trace): per worker, each
        batch's fetch, transform, collate and hand-over; the training loop's waits for data;
        tuning changes. It holds the last ``flowloader.stats.trace_batches`` batches."""
        if self.timeline is None:
            raise RuntimeError(
                "no trace was recorded: flowloader.stats.trace_batches is 0 or "
                "flowloader.stats.enabled is False"
            )
        self.timeline.write(path)

    @property
    def mean_in_flight(self) -> float:
        """Batches in flight when one arrived, on average (up to prefetch_factor * workers)."""
        return self.in_flight_total / self.batches if self.batches else 0.0

    @property
    def data_wait_fraction(self) -> float:
        """Share of the consumer's time spent waiting for batches."""
        return self.stage_s["wait"] / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def worker_busy_fraction(self) -> float:
        """Share of the workers' time spent loading (1.0 without workers: the main process)."""
        if self.elapsed_s <= 0:
            return 0.0
        return self.worker_busy_s / (self.elapsed_s * max(self.num_workers, 1))

    @property
    def cores_used(self) -> float:
        return (self.main_cpu_s + self.worker_cpu_s) / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def input_bound(self) -> bool:
        """True when the consumer waits for data more than a tenth of its time."""
        return self.data_wait_fraction > 0.1

    def verdict(self) -> str:
        wait = f"the training loop waited for data {self.data_wait_fraction:.0%} of the time"
        if not self.input_bound:
            return f"not input-bound: {wait}"
        if self.num_workers and self.worker_busy_fraction > 0.9:
            advice = "the workers are saturated: more workers or cheaper transforms"
        elif self.num_workers:
            idle = 1 - self.worker_busy_fraction
            advice = f"the workers are idle {idle:.0%} of the time: raise prefetch_factor"
        else:
            advice = "loading runs in the training process: try num_workers > 0"
        return f"input-bound: {wait}; {advice}"

    @classmethod
    def merged(cls, parts: list[LoaderStats]) -> LoaderStats:
        """One record for several epochs (e.g. a run that crossed an epoch boundary)."""
        total = cls(num_workers=parts[0].num_workers if parts else 0)
        for part in parts:
            total.batches += part.batches
            total.elapsed_s += part.elapsed_s
            total.worker_busy_s += part.worker_busy_s
            total.worker_cpu_s += part.worker_cpu_s
            total.main_cpu_s += part.main_cpu_s
            total.in_flight_total += part.in_flight_total
            for name, seconds in part.stage_s.items():
                total.stage_s[name] += seconds
            total.skipped.extend(part.skipped)
            total.worker_restarts += part.worker_restarts
            if part.sources is not None:
                total.sources = total.sources or {}
                for name, count in part.sources.items():
                    total.sources[name] = total.sources.get(name, 0) + count
        if parts:
            total.tuning = [change for part in parts for change in part.tuning]
            total.worker_method = parts[0].worker_method
            total.first_batch_s = parts[0].first_batch_s
            total.in_flight = parts[-1].in_flight
            total.timeline = parts[-1].timeline
        return total

    def as_dict(self) -> dict:
        return {
            "batches": self.batches,
            "elapsed_s": self.elapsed_s,
            "first_batch_s": self.first_batch_s,
            "stage_s": dict(self.stage_s),
            "in_flight": self.in_flight,
            "mean_in_flight": self.mean_in_flight,
            "num_workers": self.num_workers,
            "worker_busy_fraction": self.worker_busy_fraction,
            "data_wait_fraction": self.data_wait_fraction,
            "cores_used": self.cores_used,
            "input_bound": self.input_bound,
            "skipped": len(self.skipped),
            "worker_restarts": self.worker_restarts,
            "sources": dict(self.sources) if self.sources is not None else None,
            "worker_method": self.worker_method,
            "free_threaded": self.free_threaded,
            "tuning": [dict(change) for change in self.tuning],
            "memory": dict(self.memory) if self.memory is not None else None,
        }
