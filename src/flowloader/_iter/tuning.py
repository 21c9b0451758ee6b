"""num_workers="auto": how many workers, of which kind, how far ahead, decided from what the
loop and the loader do.

The tuner sees, per batch handed out, how long the loop waited in ``next()``, how long its
own step took (from one ``next()`` returning to the next call) with the main thread's CPU
time in that step, and the workers' loading time since the batch before. It decides nothing
itself about batches: a change of workers or of their kind is made by the iterator at a
batch boundary, as a live change that carries the epoch on (Epoch.move_to), and a change
of prefetch by the number of batches
it keeps in flight, so batches and order stay those of any setting (docs/design/autotune.md).

- First, a probe: the epoch starts in this process, where the wait is the loading itself,
  and (worker_method "auto") a sampler measures how much of the loading holds the GIL
  (gil.py). Loading that costs less than ``IN_PROCESS_FRACTION`` of the step, or under
  ``IN_PROCESS_BELOW_S`` a batch, stays in process (a worker's hand-over would cost more
  than it hides). Otherwise the fewest workers whose predicted step rate is within
  ``GOOD_ENOUGH`` of the best: n workers load n batches per load time, the loop takes one
  per step, and the cores run at most one batch's loading plus the loop's own CPU time per
  batch each, so a loop that computes keeps the CPU it needs. Threads, where the GIL lets
  n of them load at that rate (the part that holds the GIL runs one at a time, and the GIL
  busy at most ``GIL_BUSY_MAX`` of the time): they start at once and share memory. Else
  processes.
- Then windows of batches, the first after each change left out (it holds the new workers'
  start-up, not their pace). The loop waiting more than ``WAIT_GROW`` of the time: while
  the workers were busy less than ``BUSY_SATURATED`` of it, they keep up on average but not
  in time, so prefetch deepens (up to ``MAX_PREFETCH``); else a worker is added, up to the
  usable cores (threads turn into processes where the GIL would hold the next one back);
  with a worker on every usable core, prefetch deepens instead, for batches under
  ``LARGE_BATCH_BYTES``: batches that take longer than others leave a worker idle while the
  loop waits for the slow one in order, unless more are queued for it (packed token rows,
  whose packing varies). Batches that large start at prefetch 1 and deepen only for idle
  workers: each one more in flight is a fresh buffer whose pages the kernel faults in (17 ms
  for 38.5 MB here, a quarter of an ImageNet batch's loading), and with every core busy a
  deeper queue cannot make the loading faster.
  Waiting under ``WAIT_SHRINK`` for two windows removes a worker, giving its core back to
  the loop, but never down to a count at which the loop was seen waiting.
- In process, a window is a probe again (the loop's wait there is the loading itself, not a
  sign that workers fall behind): cheap loading stays, loading that has grown gets workers.
  There a batch is measured about every ``IN_PROCESS_MEASURE_GAP_S`` (up to
  ``IN_PROCESS_MEASURE_MAX`` batches apart), standing for those between: batches that stay
  in process are cheap, and telling the tuner of each cost 2-3 us of an MNIST batch's 67.
- A memory budget caps the workers (``limit``).
- The probe's prediction is checked against what the workers then give (where the tuner
  chooses their kind): the first window counted after the probe's choice, when the loop
  waits, at a rate short of the predicted one by more than the noise (two standard errors of
  the window's mean batch time, ``PREDICTION_NOISE_MIN`` at least: the model's own error),
  revisits the choice: the other kind of worker, as many, is measured over a window, and
  kept only where it is faster beyond the noise of both windows; else the first comes back.
  On a busy machine the GIL's share or the cores' pace can read wrong in the probe; the
  workers' own pace cannot.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .._pages import MMAP_THRESHOLD_MAX

PROBE_MAX_BATCHES = 16
PROBE_MIN_S = 0.05
IN_PROCESS_FRACTION = 0.05
IN_PROCESS_BELOW_S = 0.001
GOOD_ENOUGH = 0.95  # the fewest workers within this of the best predicted rate
# Threads keep the GIL busy at most this share of the time. Its holders queue, a thread that
# wants it back after a short native call may wait a switch interval (5 ms) for one that
# computes, and that is not in the share the probe reads: a Mixture (many short kernel calls,
# 16-23% held) loaded 0.92x as fast on 2 threads as on 2 processes, and beside a loop of 20 ms
# of Python a batch 0.94x. Calibrated on the six benchmark pipelines: a quarter chooses the
# faster kind on each, with a margin on both sides (2 workers: threads up to 13% held; the
# ImageNet pipelines read 1-9%, a Mixture 16-23%, packed token rows 69-93%, which read once
# low enough for threads at the old bound of 1, and loaded at half the rate of processes).
GIL_BUSY_MAX = 1 / 4
WINDOW_MIN_BATCHES = 8
WINDOW_MIN_S = 1.0
WAIT_GROW = 0.10
WAIT_SHRINK = 0.01
BUSY_SATURATED = 0.8
MAX_PREFETCH = 4
# Batches at least this large (glibc's largest mmap threshold: from there on, every batch in
# flight holds memory of its own, a thread worker's block or a process's segment) start at
# prefetch 1, and their prefetch deepens only for workers seen idle.
LARGE_BATCH_BYTES = MMAP_THRESHOLD_MAX
STEP_NOISE_S = 0.001
# A window's rate this far below the probe's prediction, at least, is the model's error, not
# the choice's (more where the window's batch times spread more).
PREDICTION_NOISE_MIN = 0.15
IN_PROCESS_MEASURE_GAP_S = 0.002
IN_PROCESS_MEASURE_MAX = 32
PROCESSES, THREADS = "multiprocessing", "thread"


class Setting(NamedTuple):
    """What the loader runs with: the worker count, their kind (the DataLoader's spelling;
    None: as given) and prefetch_factor (None: as given)."""

    num_workers: int
    worker_method: str | None = None
    prefetch_factor: int | None = None


@dataclass(frozen=True)
class Change:
    """One decision: when (seconds since the tuner started), the new setting, why, and
    what was measured."""

    at_s: float
    num_workers: int
    reason: str
    measured: dict[str, float]
    worker_method: str | None = None
    prefetch_factor: int | None = None


@dataclass
class _Window:
    batches: int = 0
    wait_s: float = 0.0
    step_s: float = 0.0
    step_cpu_s: float = 0.0
    busy_s: float = 0.0
    square_s: float = 0.0  # the sum of each batch's (wait + step) squared

    def add(
        self, wait_s: float, step_s: float, step_cpu_s: float, busy_s: float, batches: int
    ) -> None:
        """One batch measured, standing for ``batches`` (itself and those not measured before
        it); ``busy_s`` is the workers' loading since the last one measured."""
        self.batches += batches
        self.wait_s += wait_s * batches
        self.step_s += step_s * batches
        self.step_cpu_s += step_cpu_s * batches
        self.busy_s += busy_s
        self.square_s += (wait_s + step_s) ** 2 * batches

    @property
    def rate(self) -> float:
        """Batches per second over the window."""
        return self.batches / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def noise(self) -> float:
        """The rate's relative noise: two standard errors of the mean batch time over it,
        PREDICTION_NOISE_MIN at least."""
        n = self.batches
        if n < 2 or self.wall_s <= 0:
            return 1.0
        mean = self.wall_s / n
        spread = math.sqrt(max(self.square_s / n - mean * mean, 0.0))
        return max(2 * spread / (mean * math.sqrt(n)), PREDICTION_NOISE_MIN)

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

    def busy_fraction(self, workers: int) -> float:
        """The share of the window the workers spent loading."""
        if self.wall_s <= 0 or workers <= 0:
            return 0.0
        return min(self.busy_s / (self.wall_s * workers), 1.0)

    def measured(self, workers: int) -> dict[str, float]:
        n = max(self.batches, 1)
        return {
            "batches": float(self.batches),
            "wait_ms_per_batch": 1000 * self.wait_s / n,
            "step_ms_per_batch": 1000 * self.step_s / n,
            "wait_fraction": self.wait_s / self.wall_s if self.wall_s > 0 else 0.0,
            "loop_core_use": self.loop_core_use,
            "workers_busy": self.busy_fraction(workers),
        }


@dataclass
class WorkerTuner:
    """Decides the setting of a num_workers="auto" loader, batch by batch. ``methods``: the
    worker kinds it may choose (one: as given); ``prefetch``: where prefetch starts, and
    ``tune_prefetch`` whether it may change it."""

    cores: int
    methods: tuple[str, ...] = (PROCESSES,)
    prefetch: int = 2
    tune_prefetch: bool = False
    num_workers: int = 0
    changes: list[Change] = field(default_factory=list)
    max_workers: int | None = None  # what memory_budget allows (None: no limit)
    gil_held: float | None = None  # the share of the loading that holds the GIL (probe)
    batch_bytes: int = 0  # the largest batch measured (0: not measured)
    _window: _Window = field(default_factory=_Window)
    _quiet_windows: int = 0
    _warming: bool = False  # the window since the last change: their start-up, left out
    _floor: int = 0  # the loop waited at this count: never shrink to it again
    _load_s: float = 0.0  # the probe's measurements: one batch's loading in process,
    _step_s: float = 0.0  # the loop's step,
    _loop_cpu_s: float = 0.0  # and its CPU time in a step
    _predicted: float | None = None  # the probe's choice's rate, to check (batches/s)
    _trial: tuple[str, float, float] | None = None  # the kind revisited: its rate and noise
    _started: float = field(default_factory=time.perf_counter)

    def __post_init__(self) -> None:
        self.method = self.methods[0]

    @property
    def setting(self) -> Setting:
        return Setting(self.num_workers, self.method, self.prefetch)

    @property
    def probing(self) -> bool:
        """True until the probe has decided (the GIL sampler runs only then)."""
        return not self.changes

    @property
    def chooses_method(self) -> bool:
        """True where it may choose threads or processes (worker_method "auto")."""
        return THREADS in self.methods and PROCESSES in self.methods

    @property
    def ceiling(self) -> int:
        """The most workers it may choose: the usable cores, or fewer where memory says."""
        return self.cores if self.max_workers is None else min(self.cores, self.max_workers)

    def workers_start(self) -> None:
        """A new epoch's workers start on the setting reached: its window starts afresh, and
        is left out as the window after a change is."""
        self._window = _Window()
        self._warming = self.num_workers > 0

    @property
    def unmeasured_between(self) -> int:
        """How many batches to hand out unmeasured before the next one measured: in process
        after the probe, those within IN_PROCESS_MEASURE_GAP_S at the last pace measured;
        else none."""
        if self.num_workers or not self.changes:
            return 0
        per_batch = max(self._load_s + self._step_s, 1e-9)
        return min(int(IN_PROCESS_MEASURE_GAP_S / per_batch), IN_PROCESS_MEASURE_MAX)

    def observe(
        self,
        wait_s: float,
        step_s: float,
        step_cpu_s: float,
        busy_s: float = 0.0,
        gil_held: float | None = None,
        batches: int = 1,
    ) -> Setting | None:
        """One batch handed out: the loop waited ``wait_s`` for it and spent ``step_s`` (with
        ``step_cpu_s`` of its thread's CPU) since the batch before, while the workers loaded
        for ``busy_s``; ``gil_held``: the probe's GIL estimate so far; ``batches``: how many
        batches this one stands for (itself and those unmeasured before it). The new setting
        when it should change now, else None."""
        if gil_held is not None:
            self.gil_held = gil_held
        self._window.add(wait_s, step_s, step_cpu_s, busy_s, batches)
        window = self._window
        if self.probing:
            return self._probe_ends(window)
        if window.batches < WINDOW_MIN_BATCHES or window.wall_s < WINDOW_MIN_S:
            return None
        if self._warming:
            self._warming, self._window = False, _Window()
            return None
        if self.num_workers == 0:  # in process the wait is the loading: probe again
            return self._decide(self._after_probe(window), window)
        revisited = self._revisit(window)
        if revisited is not None:
            return self._decide(revisited, window)
        return self._decide(self._after_window(window), window)

    # -- the probe ---------------------------------------------------------------------------

    def _probe_ends(self, window: _Window) -> Setting | None:
        """The probe's decision once it has measured enough (None: not yet)."""
        if window.wall_s < PROBE_MIN_S and window.batches < PROBE_MAX_BATCHES:
            return None
        decision = self._after_probe(window)
        if self._gil_awaited(decision[0]) and window.batches < PROBE_MAX_BATCHES:
            return None
        return self._decide(decision, window)

    def _after_probe(self, window: _Window) -> tuple[Setting, str]:
        load = self._load_s = window.wait_s / window.batches  # in process, the wait is loading
        step = self._step_s = window.step_s / window.batches
        loop_cpu = self._loop_cpu_s = window.loop_core_use * step
        if load < IN_PROCESS_BELOW_S or load < IN_PROCESS_FRACTION * step:
            return self._with(0), (
                f"loading takes {1000 * load:.2f} ms a batch against a {1000 * step:.2f} ms "
                "step: in this process"
            )
        if self.ceiling == 0:
            return self._with(0), "memory_budget leaves no room for a worker: in this process"

        counts = range(1, self.ceiling + 1)
        best = max(self._rate(n) for n in counts)
        workers = min(n for n in counts if self._rate(n) >= GOOD_ENOUGH * best)
        method, why = self._method_for(workers)
        self._predicted = self._rate(workers, threads=method == THREADS)
        prefetch, ahead = None, ""
        if self._large_batches:
            prefetch, ahead = 1, f"; prefetch 1 (batches of {self.batch_bytes / 2**20:.1f} MiB)"
        return self._with(workers, method, prefetch), (
            f"loading takes {1000 * load:.1f} ms a batch, the loop's step {1000 * step:.1f} ms "
            f"({1000 * loop_cpu:.1f} ms of CPU): {workers} workers give "
            f"{self._rate(workers):.1f} batches/s on {self.cores} cores{why}{ahead}"
        )

    @property
    def _large_batches(self) -> bool:
        """True where prefetch is tuned and batches are at least LARGE_BATCH_BYTES."""
        return self.tune_prefetch and self.batch_bytes >= LARGE_BATCH_BYTES

    def _gil_awaited(self, setting: Setting) -> bool:
        """True while the probe would choose workers of either kind without the GIL measured
        (the sampler measures it on the probe's next batches)."""
        return self.chooses_method and setting.num_workers > 0 and self.gil_held is None

    def _rate(self, workers: int, threads: bool = False) -> float:
        """Batches/s with ``workers`` processes: the workers' pace, the loop's, and what the
        cores can run of the loading plus the loop's CPU; ``threads``: as many threads, which
        the GIL may hold back (_method_for)."""
        load, step, loop_cpu = self._load_s, self._step_s, self._loop_cpu_s
        rate = min(workers / load, 1 / max(step, 1e-9), self.cores / (load + loop_cpu))
        return min(rate, self._threads_rate(workers)) if threads else rate

    def _threads_rate(self, workers: int) -> float:
        """Batches/s that ``workers`` threads load, where the GIL is busy GIL_BUSY_MAX of the
        time at most with the loading's GIL-holding part and the loop's CPU."""
        load, loop_cpu = self._load_s, self._loop_cpu_s
        processes = min(workers / load, self.cores / (load + loop_cpu))
        held = self.gil_held if self.gil_held is not None else 1.0
        return min(processes, GIL_BUSY_MAX / max(held * load + loop_cpu, 1e-9))

    def _method_for(self, workers: int) -> tuple[str, str]:
        """Threads where ``workers`` of them load within GOOD_ENOUGH of processes' pace, else
        processes; and why. Under one GIL, the loading's GIL-holding part and the loop's CPU
        time (counted as holding it: the safe side) run one at a time, keeping the GIL busy
        ``GIL_BUSY_MAX`` of the time at most."""
        if not self.chooses_method:
            return self.method, ""
        held = self.gil_held
        if held is None:
            return PROCESSES, "; processes (the GIL was not measured)"
        load, loop_cpu = self._load_s, self._loop_cpu_s
        processes = min(workers / load, self.cores / (load + loop_cpu))
        threads = self._threads_rate(workers)
        share = f"the loading holds the GIL {100 * held:.0f}% of its time"
        if threads >= GOOD_ENOUGH * processes:
            return THREADS, f"; threads ({share})"
        return PROCESSES, f"; processes ({share}: threads would give {threads:.1f} batches/s)"

    # -- windows -------------------------------------------------------------------------

    def _revisit(self, window: _Window) -> tuple[Setting, str] | None:
        """The probe's choice of kind checked against the first window counted after it (a
        rate short of the prediction beyond the noise, while the loop waits: the other kind
        is tried), and the other kind's window against the first's. None: nothing to
        revisit."""
        if self._trial is not None:
            first, first_rate, first_noise = self._trial
            self._trial = None
            noise = max(window.noise, first_noise)
            if window.rate > first_rate * (1 + noise):
                return self.setting, ""  # kept: the rest of the window's rules next time
            return self._with(self.num_workers, first), (
                f"{self.method} gave {window.rate:.1f} batches/s, not more than {first}'s "
                f"{first_rate:.1f} beyond the noise ({100 * noise:.0f}%): {first} again"
            )
        predicted, self._predicted = self._predicted, None
        if predicted is None or not self.chooses_method:
            return None
        waited = window.wait_s / window.wall_s if window.wall_s > 0 else 0.0
        if waited <= WAIT_GROW or window.rate >= predicted * (1 - window.noise):
            return None
        other = PROCESSES if self.method == THREADS else THREADS
        self._trial = (self.method, window.rate, window.noise)
        return self._with(self.num_workers, other), (
            f"{self.num_workers} {self.method} workers gave {window.rate:.1f} batches/s "
            f"against the {predicted:.1f} predicted, short beyond the noise "
            f"({100 * window.noise:.0f}%): trying {other}"
        )

    def _after_window(self, window: _Window) -> tuple[Setting, str]:
        waited = window.measured(self.num_workers)["wait_fraction"]
        if waited > WAIT_GROW:
            self._quiet_windows = 0
            self._floor = max(self._floor, self.num_workers)
            busy = window.busy_fraction(self.num_workers)
            deeper = self.tune_prefetch and self.prefetch < MAX_PREFETCH
            if deeper and self.num_workers and busy < BUSY_SATURATED:
                return self._with(self.num_workers, prefetch=self.prefetch + 1), (
                    f"the loop waited {100 * waited:.0f}% of the time while the workers "
                    f"were busy {100 * busy:.0f}%: deeper prefetch"
                )
            if self.num_workers < self.ceiling:
                workers = self.num_workers + 1
                method, why = self._method_for(workers) if self.method == THREADS else ("", "")
                return self._with(workers, method or self.method), (
                    f"the loop waited {100 * waited:.0f}% of the time{why}"
                )
            if deeper and self.num_workers and not self._large_batches:
                return self._with(self.num_workers, prefetch=self.prefetch + 1), (
                    f"the loop waited {100 * waited:.0f}% of the time with a worker on each "
                    "core it may use: deeper prefetch, for the gaps where one waits its turn"
                )
            return self.setting, ""
        if waited < WAIT_SHRINK:
            self._quiet_windows += 1
            if self._quiet_windows >= 2 and self.num_workers - 1 > self._floor:
                self._quiet_windows = 0
                return self._with(self.num_workers - 1), (
                    f"the loop waited {100 * waited:.1f}% of the time for two windows: a core "
                    "goes back to it"
                )
        else:
            self._quiet_windows = 0
        return self.setting, ""

    # -- decisions -----------------------------------------------------------------------

    def _with(
        self, workers: int, method: str | None = None, prefetch: int | None = None
    ) -> Setting:
        return Setting(workers, method or self.method, prefetch or self.prefetch)

    def limit(self, max_workers: int) -> Setting | None:
        """memory_budget allows ``max_workers`` at most: the new setting when the current
        count is above it (recorded as a change), else None."""
        self.max_workers = max_workers
        if self.num_workers <= max_workers:
            return None
        decision = self._with(max_workers), f"memory_budget allows {max_workers} workers"
        return self._decide(decision, _Window(), force=True)

    def _decide(
        self, decision: tuple[Setting, str], window: _Window, force: bool = False
    ) -> Setting | None:
        """Record the probe's decision and every change; the new setting when it changed."""
        setting, reason = decision
        probe = self.probing
        self._window = _Window()
        changed = setting != self.setting
        if not changed and not (probe or force):
            return None
        measured = window.measured(self.num_workers)
        if probe and self.gil_held is not None:
            measured["gil_held"] = self.gil_held
        self.num_workers = setting.num_workers
        self.method = setting.worker_method or self.method
        self.prefetch = setting.prefetch_factor or self.prefetch
        self._warming = changed and self.num_workers > 0
        at = time.perf_counter() - self._started
        change = Change(at, self.num_workers, reason, measured, self.method, self.prefetch)
        self.changes.append(change)
        return setting if changed else None

    def as_records(self) -> list[dict[str, Any]]:
        """The changes as plain dicts (for stats().tuning)."""
        return [vars(change).copy() for change in self.changes]
