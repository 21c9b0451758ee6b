"""num_workers="auto": how many workers, decided from what the loop and the loader do.

The tuner sees, per batch handed out, how long the loop waited in ``next()`` and how long
its own step took (from one ``next()`` returning to the next call) with the main thread's
CPU time in that step. It decides nothing itself about batches: a change of workers is made
by the iterator at a batch boundary, through the resume path, so batches and order stay
those of any worker count (docs/design/autotune.md).

- First, a probe: the epoch starts in this process, where the wait is the loading itself.
  Loading that costs less than ``IN_PROCESS_FRACTION`` of the step, or under
  ``IN_PROCESS_BELOW_S`` a batch, stays in process (a worker's hand-over would cost more
  than it hides). Otherwise the fewest workers whose predicted step rate is within
  ``GOOD_ENOUGH`` of the best: n workers load n batches per load time, the loop takes one
  per step, and the cores run at most one batch's loading plus the loop's own CPU time per
  batch each, so a loop that computes keeps the CPU it needs.
- Then windows of batches: the loop waiting more than ``WAIT_GROW`` of the time adds a
  worker, up to the usable cores; waiting under ``WAIT_SHRINK`` for two windows removes one,
  giving its core back to the loop, but never below a count at which the loop was seen
  waiting.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

PROBE_MIN_BATCHES = 2
PROBE_MAX_BATCHES = 16
PROBE_MIN_S = 0.05
IN_PROCESS_FRACTION = 0.05
IN_PROCESS_BELOW_S = 0.001
GOOD_ENOUGH = 0.95  # the fewest workers within this of the best predicted rate
WINDOW_MIN_BATCHES = 8
WINDOW_MIN_S = 1.0
WAIT_GROW = 0.10
WAIT_SHRINK = 0.01
STEP_NOISE_S = 0.001


@dataclass(frozen=True)
class Change:
    """One decision: when (seconds since the tuner started), the new worker count, why, and
    what was measured."""

    at_s: float
    num_workers: int
    reason: str
    measured: dict[str, float]


@dataclass
class _Window:
    batches: int = 0
    wait_s: float = 0.0
    step_s: float = 0.0
    step_cpu_s: float = 0.0

    def add(self, wait_s: float, step_s: float, step_cpu_s: float) -> None:
        self.batches += 1
        self.wait_s += wait_s
        self.step_s += step_s
        self.step_cpu_s += step_cpu_s

    @property
    def loop_core_use(self) -> float:
        """The share of a core the loop's step uses (its thread's CPU time over the step's
        wall time); 0 for steps under ``STEP_NOISE_S``, where the clocks' grain decides."""
        if self.step_s < STEP_NOISE_S * max(self.batches, 1):
            return 0.0
        return min(self.step_cpu_s / self.step_s, 1.0)

    @property
    def wall_s(self) -> float:
        return self.wait_s + self.step_s

    def measured(self) -> dict[str, float]:
        n = max(self.batches, 1)
        return {
            "batches": float(self.batches),
            "wait_ms_per_batch": 1000 * self.wait_s / n,
            "step_ms_per_batch": 1000 * self.step_s / n,
            "wait_fraction": self.wait_s / self.wall_s if self.wall_s > 0 else 0.0,
            "loop_core_use": self.loop_core_use,
        }


@dataclass
class WorkerTuner:
    """Decides the worker count of a num_workers="auto" loader, batch by batch."""

    cores: int
    num_workers: int = 0
    changes: list[Change] = field(default_factory=list)
    max_workers: int | None = None  # what memory_budget allows (None: no limit)
    _window: _Window = field(default_factory=_Window)
    _quiet_windows: int = 0
    _floor: int = 0  # the loop waited at this count: never shrink to it again
    _started: float = field(default_factory=time.perf_counter)

    def observe(self, wait_s: float, step_s: float, step_cpu_s: float) -> int | None:
        """One batch handed out: the loop waited ``wait_s`` for it and spent ``step_s`` (with
        ``step_cpu_s`` of its thread's CPU) since the batch before. The new worker count when
        it should change now, else None."""
        self._window.add(wait_s, step_s, step_cpu_s)
        window = self._window
        if self.num_workers == 0 and not self.changes:
            enough = window.batches >= PROBE_MIN_BATCHES and window.wall_s >= PROBE_MIN_S
            if not enough and window.batches < PROBE_MAX_BATCHES:
                return None
            return self._decide(self._after_probe(window), window)
        if window.batches < WINDOW_MIN_BATCHES or window.wall_s < WINDOW_MIN_S:
            return None
        return self._decide(self._after_window(window), window)

    def _after_probe(self, window: _Window) -> tuple[int, str]:
        load = window.wait_s / window.batches  # in process, the wait is the loading
        step = window.step_s / window.batches
        loop_cpu = window.loop_core_use * step
        if load < IN_PROCESS_BELOW_S or load < IN_PROCESS_FRACTION * step:
            return 0, (
                f"loading takes {1000 * load:.2f} ms a batch against a {1000 * step:.2f} ms "
                "step: in this process"
            )

        def rate(workers: int) -> float:
            """Batches/s: the workers' pace, the loop's, and what the cores can run."""
            return min(workers / load, 1 / max(step, 1e-9), self.cores / (load + loop_cpu))

        if self.ceiling == 0:
            return 0, "memory_budget leaves no room for a worker: in this process"
        best = max(rate(n) for n in range(1, self.ceiling + 1))
        workers = min(n for n in range(1, self.ceiling + 1) if rate(n) >= GOOD_ENOUGH * best)
        return workers, (
            f"loading takes {1000 * load:.1f} ms a batch, the loop's step {1000 * step:.1f} ms "
            f"({1000 * loop_cpu:.1f} ms of CPU): {workers} workers give {rate(workers):.1f} "
            f"batches/s on {self.cores} cores"
        )

    def _after_window(self, window: _Window) -> tuple[int, str]:
        waited = window.measured()["wait_fraction"]
        if waited > WAIT_GROW:
            self._quiet_windows = 0
            self._floor = max(self._floor, self.num_workers)
            if self.num_workers < self.ceiling:
                return self.num_workers + 1, f"the loop waited {100 * waited:.0f}% of the time"
            return self.num_workers, ""
        if waited < WAIT_SHRINK:
            self._quiet_windows += 1
            if self._quiet_windows >= 2 and self.num_workers - 1 > self._floor:
                self._quiet_windows = 0
                return self.num_workers - 1, (
                    f"the loop waited {100 * waited:.1f}% of the time for two windows: a core "
                    "goes back to it"
                )
        else:
            self._quiet_windows = 0
        return self.num_workers, ""

    @property
    def ceiling(self) -> int:
        """The most workers it may choose: the usable cores, or fewer where memory says."""
        return self.cores if self.max_workers is None else min(self.cores, self.max_workers)

    def limit(self, max_workers: int) -> int | None:
        """memory_budget allows ``max_workers`` at most: the new count when the current one
        is above it (recorded as a change), else None."""
        self.max_workers = max_workers
        if self.num_workers <= max_workers:
            return None
        self.num_workers = max_workers
        at = time.perf_counter() - self._started
        reason = f"memory_budget allows {max_workers} workers"
        self.changes.append(Change(at, max_workers, reason, {}))
        self._window = _Window()
        return max_workers

    def _decide(self, decision: tuple[int, str], window: _Window) -> int | None:
        """Record the probe's decision and every change; the new count when it changed."""
        workers, reason = decision
        probe = not self.changes
        self._window = _Window()
        if workers == self.num_workers and not probe:
            return None
        changed = workers != self.num_workers
        self.num_workers = workers
        at = time.perf_counter() - self._started
        self.changes.append(Change(at, workers, reason, window.measured()))
        return workers if changed else None

    def as_records(self) -> list[dict[str, Any]]:
        """The changes as plain dicts (for stats().tuning)."""
        return [vars(change).copy() for change in self.changes]
