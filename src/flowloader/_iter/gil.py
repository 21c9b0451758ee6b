"""How much of the loading holds the GIL, measured while it runs in this process (the
tuner's probe), to choose between thread workers and worker processes.

A second thread runs Python beside the loading, as a thread worker would, and counts the CPU
time it gets. While the loading runs GIL-free code (image decoding, NumPy, I/O) that thread
runs freely; while the loading runs Python, the two take turns at the switch interval, so it
gets half. The share it misses, doubled, is the share of the loading that holds the GIL.
Convoys count too: loading that drops and retakes the GIL in quick succession starves that
thread as it would starve thread workers.

It samples only ``MIN_SAMPLED_S`` of the probe's batches, which the tuner does not time, as
it costs the loading up to half its speed while it runs; and only once a batch has shown
loading worth workers (cheap loading stays in process whatever the GIL does).
"""

from __future__ import annotations

import threading
import time

MIN_SAMPLED_S = 0.01


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
        self._thread = threading.Thread(
            target=self._run, name="flowloader-gil-sampler", daemon=True
        )
        self._thread.start()

    @property
    def wanted(self) -> bool:
        """True until enough has been sampled."""
        return self.sampled_s < MIN_SAMPLED_S and not self._stopped

    def sample(self, on: bool) -> None:
        """Start or stop sampling; stopping waits (briefly) until the sample is counted."""
        if on:
            self._counted.clear()
            self._sampling.set()
            self._since = time.perf_counter()
        else:
            self._sampling.clear()
            # The window is timed here: a thread starved of the GIL may not even start.
            self.sampled_s += time.perf_counter() - self._since
            self._counted.wait(0.1)

    def _run(self) -> None:
        while not self._stopped:
            if not self._sampling.wait(0.1):
                continue
            cpu = time.thread_time()
            while self._sampling.is_set() and not self._stopped:
                for _ in range(200):  # Python: it needs the GIL to run
                    pass
            self.free_s += time.thread_time() - cpu
            self._counted.set()

    def held_fraction(self) -> float | None:
        """The share of the sampled time the loading held the GIL (None: too little sampled
        to tell)."""
        if self.sampled_s < MIN_SAMPLED_S:
            return None
        missed = 1 - min(self.free_s / self.sampled_s, 1.0)
        return min(2 * missed, 1.0)

    def stop(self) -> None:
        self._stopped = True
        self._counted.set()
        self._sampling.set()
