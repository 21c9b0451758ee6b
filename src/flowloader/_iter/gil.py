"""How much of the loading holds the GIL, measured while it runs in this process (the
tuner's probe), to choose between thread workers and worker processes.

A second thread runs beside the loading as a thread worker would: short stretches of Python
(a few microseconds), each followed by a system call that lets go of the GIL, and it counts
the CPU time it gets. While the loading runs GIL-free code (image decoding, NumPy, I/O) it
runs freely; while the loading holds the GIL it waits, and it takes the GIL only for a
moment each time the loading drops it, so the loading hardly slows down. The share of the
time it misses is the share of the loading that holds the GIL.

A thread that spun in Python without letting go would measure something else: it keeps the
GIL for a whole switch interval (5 ms) each time it gets it, so loading that drops the GIL
often, for short calls, would wait that long at each drop while the spinner ran on, reading
as GIL-free (packed token rows, Python packing between NumPy calls: 37% held by a spinner,
90% by this sampler, and two thread workers load them no faster than one).

The share is of the time it could observe, not of wall time: on a busy machine a runnable
thread waits for a CPU, and that wait is not the GIL's. The kernel counts each thread's CPU
time and its wait for a CPU (``/proc/<pid>/task/<tid>/schedstat``). The sampler's time is on
a CPU (the GIL free), waiting for a CPU (left out) or waiting for the GIL (held); and the GIL
held counts only up to the CPU time the loading got: loading that takes the GIL and then
waits for a CPU holds it meanwhile, for the machine's sake, not its own (a loader that sleeps
between short stretches of Python, on a starved machine, read 62-78% held that way). A loader
that only sleeps, beside two busy loops on two cores, read 45-94% held against wall time and
got processes. Where schedstat cannot be read, the wait for a CPU reads as none.

It samples a batch from start to end (the epoch's first from ``WORTH_SAMPLING_FIRST_S`` in:
a first batch shorter than that stays in process, and sampling it would only slow it), in
windows of ``WINDOW_S``, and reads the GIL's share from the later half of them: a batch's
start-up comes first (the epoch's first batch opens files, imports image plugins, sets up a
``Mixture``) and holds the GIL far more than the loading that follows. Sampling slows the
loading by a few percent, so the tuner times sampled batches too."""

from __future__ import annotations

import collections
import math
import select
import threading
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

MIN_SAMPLED_S = 0.04
WINDOW_S = 0.01
WORTH_SAMPLING_FIRST_S = 0.01  # a first batch this long shows loading worth sampling on


def thread_times(thread: threading.Thread | None = None) -> tuple[float, float]:
    """A thread's CPU time and its time runnable but waiting for a CPU (schedstat; 0 where
    the kernel does not say), in seconds: the calling thread's, or ``thread``'s (nothing
    for a thread that has ended)."""
    if thread is None:
        thread = threading.current_thread()
    if not thread.is_alive():  # (its pthread id may be another thread's by now)
        return 0.0, 0.0
    try:  # to the nanosecond (schedstat's time on a CPU lags up to a scheduler tick)
        cpu = time.clock_gettime(time.pthread_getcpuclockid(thread.ident or 0))
    except (AttributeError, OSError):
        cpu = time.thread_time() if thread is threading.current_thread() else 0.0
    try:
        with open(f"/proc/self/task/{thread.native_id}/schedstat") as schedstat:
            return cpu, int(schedstat.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return cpu, 0.0


class Window(NamedTuple):
    """One sampled window: the sampler's CPU time, its time waiting for a CPU, the window's
    wall time and the loading thread's CPU time (or, as a boundary, the clocks then:
    cumulative, and a perf_counter stamp)."""

    cpu_s: float
    queued_s: float
    wall_s: float
    loading_cpu_s: float = math.inf  # (hand-made windows: not bounded by it)

    @property
    def held_s(self) -> float:
        """The GIL held by running loading: the sampler's wait for the GIL (its wall time
        less its CPU time and its wait for a CPU), but no more than the CPU time the loading
        got (the rest it held waiting for a CPU itself: the machine's, not the loading's)."""
        return min(max(self.wall_s - self.cpu_s - self.queued_s, 0.0), self.loading_cpu_s)

    @property
    def observed_s(self) -> float:
        """The time observed: held, or the GIL free with the sampler on a CPU."""
        return self.held_s + min(self.cpu_s, max(self.wall_s - self.queued_s, 0.0))


def _total(windows: Iterable[Window]) -> Window:
    """Windows added up. The kernel adds a wait for a CPU to a thread's count when the wait
    ends, so a wait across a window's end lands in the next window: a window may show more
    waiting than its time, the one before it less, and only their sum is right."""
    cpu = queued = wall = loading_cpu = 0.0
    for window in windows:
        cpu, queued, wall = cpu + window.cpu_s, queued + window.queued_s, wall + window.wall_s
        loading_cpu += window.loading_cpu_s
    return Window(cpu, queued, wall, loading_cpu)


def held_share(windows: Iterable[Window], wanted_s: float) -> float | None:
    """The share of the time observed (the windows added up) that running loading held the
    GIL, over the newest windows observing ``wanted_s`` (given newest first; None when they
    observe less). On a busy machine the sampler samples longer."""
    newest: list[Window] = []
    for window in windows:
        newest.append(window)
        total = _total(newest)
        if total.observed_s >= wanted_s:
            return total.held_s / total.observed_s
    return None


class GilSampler:
    """Samples while ``sample(True)``; ``held_fraction()`` is the estimate so far."""

    def __init__(
        self, clock: Callable[[threading.Thread], tuple[float, float]] = thread_times
    ) -> None:
        """``clock(thread)``: a thread's (CPU time, time waiting for a CPU), read for the
        sampler's thread and the loading one's, from the sampler's thread and from
        sample(True)'s (thread_times; tests script it)."""
        self._clock = clock
        self._loading = threading.current_thread()  # the thread that loads: sample(True)'s
        self._sampling = threading.Event()
        self._counted = threading.Event()  # the sampler has added up what it sampled
        self._counted.set()
        self._ended = threading.Event()  # sample(False) came
        self._stopped = False
        # the latest windows, the newest last
        self._windows: collections.deque[Window] = collections.deque(maxlen=16)
        self._since = 0.0
        self._start: Window | None = None  # the clocks when sampling started (when read)
        self._until = float("inf")
        self._thread = threading.Thread(
            target=self._run, name="flowloader-gil-sampler", daemon=True
        )
        self._thread.start()

    @property
    def sampled_s(self) -> float:
        """The time observed in the windows kept (held or free; not the waits for a CPU)."""
        return _total(self._windows).observed_s

    @property
    def wanted(self) -> bool:
        """True until enough has been sampled."""
        return self.sampled_s < MIN_SAMPLED_S and not self._stopped

    def sample(self, on: bool, after_s: float = 0.0) -> None:
        """Start sampling, ``after_s`` from now; or stop (waiting briefly until the last
        window is counted)."""
        if on:
            self._loading = threading.current_thread()
            self._counted.clear()
            self._ended.clear()
            self._since = time.perf_counter() + after_s
            # From now: read here, as the sampler may get the GIL only much later.
            self._start = self._reading(self._since) if after_s <= 0 else None
            self._until = float("inf")
            self._sampling.set()
        else:
            self._until = time.perf_counter()
            self._sampling.clear()
            self._ended.set()
            self._counted.wait(0.1)

    def _reading(self, at: float) -> Window:
        """The clocks now, stamped ``at``: a window's boundary (cumulative)."""
        cpu, queued = self._clock(self._thread)
        return Window(cpu, queued, at, self._clock(self._loading)[0])

    def _run(self) -> None:
        while not self._stopped:
            if not self._sampling.wait(0.1):
                continue
            # A batch over before sampling was due has nothing to count. Else every window
            # from ``since`` counts: a thread starved of the GIL may get it only after
            # sample(False), and that whole time is held (unless the clocks say that the
            # sampler waited for a CPU: they are read at sample(True) when due at once).
            since = self._since
            self._ended.wait(max(since - time.perf_counter(), 0.0))
            if self._until <= since:
                self._counted.set()
                continue
            start = self._start or self._reading(since)
            while True:
                end = start.wall_s + WINDOW_S
                while self._sampling.is_set() and not self._stopped and time.perf_counter() < end:
                    for _ in range(200):  # Python: it needs the GIL to run
                        pass
                    select.select([], [], [], 0)  # lets go of the GIL, not of the CPU
                boundary = self._reading(min(time.perf_counter(), self._until))
                self._windows.append(Window(*(b - a for a, b in zip(start, boundary, strict=True))))
                start = boundary
                if not self._sampling.is_set() or self._stopped:
                    break
            self._counted.set()

    def held_fraction(self) -> float | None:
        """The share of the sampled time that the loading held the GIL, read from the later
        half of the windows kept, ``MIN_SAMPLED_S`` at least (None: too little sampled)."""
        return held_share(reversed(self._windows), max(self.sampled_s / 2, MIN_SAMPLED_S))

    def stop(self) -> None:
        self._stopped = True
        self._counted.set()
        self._ended.set()
        self._sampling.set()
