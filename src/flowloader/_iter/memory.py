"""memory_budget: the loader's own memory kept within a budget, measured as the kernel counts
it, every byte once, whoever maps it.

- **Workers**: what each worker process adds: its unique memory (USS: its own heap, and the
  parent's pages it has written to, the copy-on-write growth of pytorch#13246), less the
  segments only it maps (counted next). Not its PSS: a forked worker maps all its parent's
  pages, and PSS would give it a share of them, though the loader added none (a parent holding
  300 MB, two workers: 110 MB of PSS each, 4 MB of USS).
- **Batches, in flight and pooled**: the shared-memory segments the workers made. A segment
  is a file in the segment folder until this process maps it; then its file is unlinked, and
  this process's ledger of what it maps (``batch_codec.mapped_bytes``) counts it: batches
  loaded and waiting, and segments back in their worker's pool for reuse. Thread workers'
  batches are in blocks of the loader's ``BlockPool``: the free ones and those in flight.
- **Dataset caches in this process**: what a dataset's cache holds here (``cached_bytes``: a
  table's decoded row groups, one cache shared by thread workers and the in-process probe),
  found through the wrappers (Subset, ConcatDataset, Packed, a Mixture's sources). Worker
  processes' caches are in their USS.
- **Held by the loop**: batches handed out that the program still holds (some array of
  each) are reported beside the loader's memory, not in it (``stats().memory["loop_bytes"]``):
  the loader cannot give them back. They still take room: fewer batches are kept in flight
  while the loop holds them, and when they alone pass the budget, one warning says how many
  and how large. At ``num_workers=0`` a batch is the loop's own arrays.

The guard measures at the first batch and then at most every ``CHECK_EVERY_S``; a
measurement costs a read of each worker's ``smaps_rollup`` and a listing of the segment
folder. From it, how many batches may be in flight: the budget, less the workers' memory,
less what the loop holds (one batch at least), over the largest batch seen. The iterator
lowers its in-flight budget to that (num_workers="auto" also caps its workers); one batch
and one worker that do not fit are an error.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable
from typing import Any

from .._ipc import shm
from .._ipc.batch_codec import held_batches, mapped_bytes
from .._warn import warn_at_user
from .._worker.buffers import BlockPool
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


def worker_bytes(pid: int) -> int | None:
    """What worker process ``pid`` adds: its unique memory (USS) less the shared memory only
    it maps (segments not yet mapped here, counted as files); None when it cannot be read
    (the process is gone, or the platform has no smaps)."""
    found = process_memory(pid)
    return None if found is None else found.uss - found.private_shmem


def _own_memory() -> int:
    """This process's resident memory that is not file or shared memory (``statm``: cheap,
    unlike smaps, and enough for an estimate); 0 where it cannot be read."""
    try:
        with open("/proc/self/statm") as statm:
            fields = statm.read().split()
        return (int(fields[1]) - int(fields[2])) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def cache_bytes(dataset: Any) -> int:
    """The bytes the caches of ``dataset`` hold in this process: its ``cached_bytes`` and
    those of the datasets it wraps (``dataset``, ``datasets``, ``sources`` attributes), each
    counted once."""
    seen: set[int] = set()
    total = 0
    waiting = [dataset]
    while waiting:
        found = waiting.pop()
        if id(found) in seen or isinstance(found, (str, bytes, type)):
            continue
        seen.add(id(found))
        held = getattr(found, "cached_bytes", None)
        if isinstance(held, int) and not isinstance(held, bool):
            total += held
        inner = getattr(found, "dataset", None)
        if inner is not None:
            waiting.append(inner)
        waiting.extend(getattr(found, "datasets", None) or ())
        sources = getattr(found, "sources", None)
        if isinstance(sources, dict):
            waiting.extend(sources.values())
    return total


def _held(blocks: BlockPool | None) -> int:
    """Batches the program holds of worker processes, and thread workers' ``blocks`` lent
    (in flight or the loop's)."""
    return held_batches() + (blocks.lent if blocks is not None else 0)


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
        self.workers_bytes = 0  # what the workers add (USS), at the last measurement
        self.workers_measured = 0  # how many workers that was
        # Before any worker process is measured, what one will hold: what this process grew
        # by while it loaded in process (the loading's working set, the batch included).
        self.worker_estimate = 0
        self._own_at_start = _own_memory() if estimate_workers else 0
        self.batches_bytes = 0  # batches in flight and pooled, at the last measurement
        self.caches_bytes = 0  # the dataset's caches in this process, at the last one
        self.loop_bytes = 0  # batches the loop holds (beside the budget), at the last one
        self.loop_batches = 0
        self._loop_warned = False
        self.peak = 0  # the most the loader held at a measurement
        self.measurements = 0
        self._next_at = 0.0
        self._held_at_measure = 0
        self._held_last = 0  # batches held (see _held) at the last measurement

    def measure_next_batch(self) -> None:
        """A new epoch: measure at its first batch."""
        self._next_at = 0.0

    def due(self, blocks: BlockPool | None = None) -> bool:
        """True when a measurement is due: the first batch, then every CHECK_EVERY_S, and
        whenever the batches held (:func:`_held`: of worker processes, or the thread
        workers' ``blocks`` lent) have doubled since the last one (a loop that keeps its
        batches fills memory faster than a clock ticks), or have grown past what the budget
        holds while the loop has not been warned (so that the warning comes as they pass it,
        whatever the clock and the doubling say)."""
        held = _held(blocks)
        if held > self._held_at_measure:
            return True
        passing = held > self._held_last and held * self.batch_bytes > self.budget
        if passing and not self._loop_warned:
            return True
        return time.perf_counter() >= self._next_at

    def measure(
        self,
        batch: Any,
        pids: Iterable[int],
        segments: str | None,
        held: int,
        blocks: BlockPool | None = None,
        caches: int = 0,
    ) -> int:
        """Measure, given the batch just handed out, the worker processes, their segments'
        name prefix (None: batches are not in segments), the batches loading or waiting
        beside the one handed out (``held - 1`` of them) and the thread workers' block pool
        (None: not known; their batches are reckoned at the largest batch's bytes), and what
        the dataset's caches hold in this process. The loader's memory now (the loop's
        holdings not included)."""
        self._next_at = time.perf_counter() + CHECK_EVERY_S
        self._held_last = _held(blocks)
        self._held_at_measure = 2 * max(self._held_last, 2)
        self.measurements += 1
        self.batch_bytes = max(self.batch_bytes, batch_bytes(batch))
        workers = measured = 0
        for pid in pids:
            found = worker_bytes(pid)
            if found is not None:  # the segments it maps are counted below, once
                workers += found
                measured += 1
        self.workers_bytes, self.workers_measured = workers, measured
        self.caches_bytes = caches
        workers += caches  # what the loader holds beside its batches
        if not measured and self._estimate:
            grown = _own_memory() - self._own_at_start
            self.worker_estimate = max(self.worker_estimate, grown)
        in_flight = max(held - 1, 0)
        if segments is not None:
            mapped = mapped_bytes(segments, in_flight)
            self.batches_bytes = segment_bytes(segments) + mapped.other
            self.loop_bytes, self.loop_batches = mapped.held, mapped.held_batches
        elif blocks is not None:  # blocks lent: the newest in flight, the others the loop's
            over = workers + blocks.nbytes + in_flight * self.batch_bytes - self.budget
            if over > 0:  # free blocks beyond the budget: given back now
                blocks.shed(over)
            lent, each = blocks.lent, blocks.lent_bytes / max(blocks.lent, 1)
            loading = min(lent, in_flight)
            self.batches_bytes = blocks.nbytes + int(loading * each)
            self.loop_bytes, self.loop_batches = (
                blocks.lent_bytes - int(loading * each),
                lent - loading,
            )
        else:
            self.batches_bytes = in_flight * self.batch_bytes
            self.loop_bytes, self.loop_batches = self.batch_bytes, 1
        self._warn_if_the_loop_holds_too_much()
        now = workers + self.batches_bytes  # the caches included
        self.peak = max(self.peak, now)
        return now

    def _warn_if_the_loop_holds_too_much(self) -> None:
        """Once: the batches the loop keeps pass the budget alone."""
        if self._loop_warned or self.loop_bytes <= self.budget or self.loop_batches < 2:
            return  # (one batch over the budget is a MemoryBudgetError: check_one_fits)
        self._loop_warned = True
        warn_at_user(
            f"memory_budget={describe(self.budget)}: the loop keeps {self.loop_batches} "
            f"batches ({describe(self.loop_bytes)}) of the loader's memory, more than the "
            "whole budget; the loader cannot give it back while some array of each is held. "
            "Drop the batches (or keep copies of what you need: array.copy()) to give it back"
        )

    @property
    def each_worker(self) -> float:
        """What a worker process holds: the workers measured, on average, or the estimate
        before any was."""
        if self.workers_measured:
            return self.workers_bytes / self.workers_measured
        return float(self.worker_estimate)

    def in_flight_allowed(self, workers: int, processes: bool = True) -> int:
        """Batches that may be loading or waiting, beside those the loop holds (one batch at
        least), with ``workers`` workers (thread workers hold nothing of their own apart)."""
        held = workers * self.each_worker if processes else 0.0
        room = self.budget - held - self.caches_bytes - max(self.batch_bytes, self.loop_bytes)
        return max(int(room // max(self.batch_bytes, 1)), 0)

    def workers_allowed(self, prefetch: int) -> int:
        """How many worker processes fit with ``prefetch`` batches each (1024 at most): n of
        them hold ``n x each + (n x prefetch + 1) x batch``, the loop's batch included."""
        each, batch = self.each_worker, self.batch_bytes
        per_worker = each + prefetch * batch
        room = self.budget - batch - self.caches_bytes
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
        """The parts of the last measurement, the budget and the peak (stats().memory)."""
        return {
            "budget": self.budget,
            "peak": self.peak,
            "batch_bytes": self.batch_bytes,
            "workers_bytes": self.workers_bytes,
            "batches_bytes": self.batches_bytes,
            "caches_bytes": self.caches_bytes,
            "loop_bytes": self.loop_bytes,
            "loop_batches": self.loop_batches,
            "measurements": self.measurements,
        }
