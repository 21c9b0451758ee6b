"""memory_budget: the loader's own memory kept within a budget, measured as the kernel counts
it.

The loader's memory is its workers' unique memory (USS: their heaps, and the parent's pages
they have written to, the copy-on-write growth of pytorch#13246) plus the shared-memory
segments that hold its batches (in flight, waiting in order, held by the loop, and kept by
the workers for reuse), as the files' allocated blocks (a worker's USS less the segments
only it maps, so that none counts twice). Thread workers add no
process; their batches are counted at the bytes of their arrays.

The guard measures at the first batch and then at most every ``CHECK_EVERY_S``; a
measurement costs a read of each worker's ``smaps_rollup`` and a listing of the segment
folder. From it, how many batches may be in flight: the budget, less the workers' memory,
less the batch the loop holds, over the largest batch seen. The iterator lowers its in-flight
budget to that (num_workers="auto" also caps its workers); one batch and one worker that do
not fit are an error.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable
from typing import Any

from .._ipc import shm
from ..errors import MemoryBudgetError
from ..resources import process_memory

CHECK_EVERY_S = 0.5
MAX_WORKERS = 1024  # the most workers_allowed() answers
MB = 1 << 20


def batch_bytes(batch: Any) -> int:
    """The bytes of the arrays in ``batch`` (a collated structure: dicts, sequences, arrays,
    tensors; anything else counts nothing)."""
    nbytes = getattr(batch, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    if isinstance(batch, dict):
        return sum(batch_bytes(value) for value in batch.values())
    if isinstance(batch, (list, tuple)):
        return sum(batch_bytes(value) for value in batch)
    return 0


def segment_bytes(prefix: str) -> int:
    """The allocated bytes of the segment files whose names start with ``prefix``."""
    total = 0
    try:
        with os.scandir(shm.shm_dir()) as entries:
            for entry in entries:
                if entry.name.startswith(prefix):
                    with contextlib.suppress(OSError):  # released while we looked
                        total += entry.stat().st_blocks * 512
    except OSError:
        return 0
    return total


def _own_memory() -> int:
    """This process's resident memory that is not file or shared memory (``statm``: cheap,
    unlike smaps, and enough for an estimate); 0 where it cannot be read."""
    try:
        with open("/proc/self/statm") as statm:
            fields = statm.read().split()
        return (int(fields[1]) - int(fields[2])) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def describe(nbytes: float) -> str:
    return f"{nbytes / MB:.1f} MB"


class MemoryGuard:
    """What the loader may keep in flight within ``budget`` bytes, from what it measures."""

    def __init__(self, budget: int, estimate_workers: bool = True) -> None:
        """``estimate_workers``: reckon worker processes before any is measured (from this
        process's growth, a read of its smaps; not needed where workers start at once)."""
        self.budget = budget
        self._estimate = estimate_workers
        self.batch_bytes = 0  # the largest batch seen
        self.workers_bytes = 0  # the workers' USS at the last measurement
        self.workers_measured = 0  # how many workers that was
        # Before any worker process is measured, what one will hold: what this process grew
        # by while it loaded in process (the loading's working set, the batch included).
        self.worker_estimate = 0
        self._own_at_start = _own_memory() if estimate_workers else 0
        self.peak = 0  # the most the loader held at a measurement
        self.measurements = 0
        self._next_at = 0.0

    def measure_next_batch(self) -> None:
        """A new epoch: measure at its first batch."""
        self._next_at = 0.0

    def due(self) -> bool:
        """True when a measurement is due (the first batch, then every CHECK_EVERY_S)."""
        return time.perf_counter() >= self._next_at

    def measure(self, batch: Any, pids: Iterable[int], segments: str | None, held: int) -> int:
        """Measure, given the batch just handed out, the worker processes, their segments'
        name prefix (None: batches are not in segments) and the batches held in memory
        otherwise (thread workers': ``held`` of them). The loader's memory now."""
        self._next_at = time.perf_counter() + CHECK_EVERY_S
        self.measurements += 1
        self.batch_bytes = max(self.batch_bytes, batch_bytes(batch))
        workers = measured = 0
        for pid in pids:
            found = process_memory(pid)
            if found is not None:  # its segments are counted below, as files
                workers += found.uss - found.private_shmem
                measured += 1
        self.workers_bytes, self.workers_measured = workers, measured
        if not measured and self._estimate:
            grown = _own_memory() - self._own_at_start
            self.worker_estimate = max(self.worker_estimate, grown)
        batches = segment_bytes(segments) if segments is not None else held * self.batch_bytes
        now = workers + batches
        self.peak = max(self.peak, now)
        return now

    @property
    def each_worker(self) -> float:
        """What a worker process holds: the workers measured, on average, or the estimate
        before any was."""
        if self.workers_measured:
            return self.workers_bytes / self.workers_measured
        return float(self.worker_estimate)

    def in_flight_allowed(self, workers: int, processes: bool = True) -> int:
        """Batches that may be loading or waiting, beside the one the loop holds, with
        ``workers`` workers (thread workers hold nothing of their own apart)."""
        held = workers * self.each_worker if processes else 0.0
        room = self.budget - held - self.batch_bytes
        return max(int(room // max(self.batch_bytes, 1)), 0)

    def workers_allowed(self, prefetch: int) -> int:
        """How many worker processes fit with ``prefetch`` batches each (1024 at most): n of
        them hold ``n x each + (n x prefetch + 1) x batch``, the loop's batch included."""
        each, batch = self.each_worker, self.batch_bytes
        per_worker = each + prefetch * batch
        room = self.budget - batch
        if room < per_worker:
            return 0
        if per_worker <= 0:
            return MAX_WORKERS
        fits = min(int(room // per_worker), MAX_WORKERS)
        while fits and fits * per_worker > room:  # a rounding step over the line
            fits -= 1
        return fits

    def check_one_fits(self, with_workers: bool) -> None:
        """Raise MemoryBudgetError when one batch (and, ``with_workers``, one worker as
        measured) exceed the budget."""
        each = self.workers_bytes / self.workers_measured if self.workers_measured else 0.0
        each = each if with_workers else 0.0
        if each + self.batch_bytes <= self.budget:
            return
        worker = f" and a worker's {describe(each)}" if each else ""
        raise MemoryBudgetError(
            f"memory_budget={describe(self.budget)} cannot hold one batch of "
            f"{describe(self.batch_bytes)}{worker}: raise memory_budget, or lower batch_size"
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "budget": self.budget,
            "peak": self.peak,
            "batch_bytes": self.batch_bytes,
            "workers_bytes": self.workers_bytes,
            "measurements": self.measurements,
        }
