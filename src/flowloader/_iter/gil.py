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

It samples a batch from start to end (the epoch's first from ``WORTH_SAMPLING_FIRST_S`` in:
a first batch shorter than that stays in process, and sampling it would only slow it), in
windows of ``WINDOW_S``, and reads the GIL's share from the later half of them: a batch's
start-up comes first (the epoch's first batch opens files, imports image plugins, sets up a
``Mixture``) and holds the GIL far more than the loading that follows. Sampling slows the
loading by a few percent, so the tuner times sampled batches too."""

from __future__ import annotations

import collections
import select
import threading
import time

MIN_SAMPLED_S = 0.04
WINDOW_S = 0.01
WORTH_SAMPLING_FIRST_S = 0.01  # a first batch this long shows loading worth sampling on


class GilSampler:
    """Samples while ``sample(True)``; ``held_fraction()`` is the estimate so far."""

    def __init__(self) -> None:
        self._sampling = threading.Event()
        self._counted = threading.Event()  # the sampler has added up what it sampled
        self._counted.set()
        self._ended = threading.Event()  # sample(False) came
        self._stopped = False
        # (CPU time the sampler got, wall time) of its latest windows, the newest last
        self._windows: collections.deque[tuple[float, float]] = collections.deque(maxlen=16)
        self._since = 0.0
        self._until = float("inf")
        self._thread = threading.Thread(
            target=self._run, name="flowloader-gil-sampler", daemon=True
        )
        self._thread.start()

    @property
    def sampled_s(self) -> float:
        """The wall time of the windows kept."""
        return sum(wall for _, wall in self._windows)

    @property
    def wanted(self) -> bool:
        """True until enough has been sampled."""
        return self.sampled_s < MIN_SAMPLED_S and not self._stopped

    def sample(self, on: bool, after_s: float = 0.0) -> None:
        """Start sampling, ``after_s`` from now; or stop (waiting briefly until the last
        window is counted)."""
        if on:
            self._counted.clear()
            self._ended.clear()
            self._since = time.perf_counter() + after_s
            self._until = float("inf")
            self._sampling.set()
        else:
            self._until = time.perf_counter()
            self._sampling.clear()
            self._ended.set()
            self._counted.wait(0.1)

    def _run(self) -> None:
        while not self._stopped:
            if not self._sampling.wait(0.1):
                continue
            # A batch over before sampling was due has nothing to count. Else every window
            # from ``since`` counts: a thread starved of the GIL may get it only after
            # sample(False), and that whole time is held.
            since = self._since
            self._ended.wait(max(since - time.perf_counter(), 0.0))
            if self._until <= since:
                self._counted.set()
                continue
            while True:
                cpu = time.thread_time()
                end = since + WINDOW_S
                while self._sampling.is_set() and not self._stopped and time.perf_counter() < end:
                    for _ in range(200):  # Python: it needs the GIL to run
                        pass
                    select.select([], [], [], 0)  # lets go of the GIL, not of the CPU
                until = min(time.perf_counter(), self._until)
                self._windows.append((time.thread_time() - cpu, max(until - since, 0.0)))
                since = until
                if not self._sampling.is_set() or self._stopped:
                    break
            self._counted.set()

    def held_fraction(self) -> float | None:
        """The share of the sampled time that the loading held the GIL, read from the later
        half of the windows kept, ``MIN_SAMPLED_S`` at least (None: too little sampled)."""
        wanted = max(self.sampled_s / 2, MIN_SAMPLED_S)
        free = wall = 0.0
        for window_free, window_wall in reversed(self._windows):
            free, wall = free + window_free, wall + window_wall
            if wall >= wanted:
                return 1 - min(free / wall, 1.0)
        return None

    def stop(self) -> None:
        self._stopped = True
        self._counted.set()
        self._ended.set()
        self._sampling.set()
