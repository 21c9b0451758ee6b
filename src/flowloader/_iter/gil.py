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

It samples windows of at most ``WINDOW_S`` of the probe's batches, ``MIN_SAMPLED_S`` in
all; they slow the loading by a few percent at most, so the tuner times them too. It starts
only once a batch has shown loading worth workers (cheap loading stays in process whatever
the GIL does), and never samples the first batch, whose start-up holds the GIL far more
than the loading does."""

from __future__ import annotations

import select
import threading
import time

MIN_SAMPLED_S = 0.02
WINDOW_S = 0.02
WORTH_SAMPLING_FIRST_S = 0.01  # a first batch this long starts sampling at the second


class GilSampler:
    """Samples while ``sample(True)``; ``held_fraction()`` is the estimate so far."""

    def __init__(self) -> None:
        self._sampling = threading.Event()
        self._counted = threading.Event()  # the sampler has added up what it sampled
        self._counted.set()
        self._stopped = False
        self.sampled_s = 0.0
        self.free_s = 0.0
        self._since = 0.0
        self._until = float("inf")
        self._thread = threading.Thread(
            target=self._run, name="flowloader-gil-sampler", daemon=True
        )
        self._thread.start()

    @property
    def wanted(self) -> bool:
        """True until enough has been sampled."""
        return self.sampled_s < MIN_SAMPLED_S and not self._stopped

    def sample(self, on: bool) -> None:
        """Start a window (it ends after ``WINDOW_S``, or here); stopping waits (briefly)
        until the window is counted."""
        if on:
            self._counted.clear()
            self._since = time.perf_counter()
            self._until = float("inf")
            self._sampling.set()
        else:
            self._until = time.perf_counter()
            self._sampling.clear()
            self._counted.wait(0.1)

    def _run(self) -> None:
        while not self._stopped:
            if not self._sampling.wait(0.1):
                continue
            cpu = time.thread_time()
            since = self._since  # from the window's start: a thread starved of the GIL
            end = since + WINDOW_S  # may not even start, which counts as held
            while self._sampling.is_set() and not self._stopped and time.perf_counter() < end:
                for _ in range(200):  # Python: it needs the GIL to run
                    pass
                select.select([], [], [], 0)  # lets go of the GIL, not of the CPU
            self.free_s += time.thread_time() - cpu
            self.sampled_s += min(time.perf_counter(), self._until) - since
            self._sampling.clear()
            self._counted.set()

    def held_fraction(self) -> float | None:
        """The share of the sampled time the loading held the GIL (None: too little sampled
        to tell)."""
        if self.sampled_s < MIN_SAMPLED_S:
            return None
        return 1 - min(self.free_s / self.sampled_s, 1.0)

    def stop(self) -> None:
        self._stopped = True
        self._counted.set()
        self._sampling.set()
