"""What num_workers="auto"'s tuner (tuning.py) is told of each batch the iterator hands out.

The tuner decides; this keeps its books: which batches go unmeasured (in process, one batch
about every ``tuning.IN_PROCESS_MEASURE_GAP_S`` stands for those before it), the loop's step
between two batches, the workers' loading time since the last batch told, and, while
``worker_method="auto"`` probes, how much of the loading holds the GIL (gil.py). While the
tuner probes, a batch is told when the loop comes back for the next one, so that a decision
applies from that next batch on.
"""

from __future__ import annotations

import time
import weakref

from .gil import WORTH_SAMPLING_FIRST_S, GilSampler
from .tuning import IN_PROCESS_BELOW_S, Setting, WorkerTuner

__all__ = ["TunerFeed"]


class TunerFeed:
    """One iterator's link to its loader's tuner, kept across the epochs of persistent
    workers (``new_epoch``) and across live changes of workers (``part_ended``)."""

    def __init__(self, tuner: WorkerTuner) -> None:
        self.tuner = tuner
        if not tuner.probing:
            tuner.workers_start()
        # When the last measured batch was handed out (the loop's step starts there).
        self._handed_at: tuple[float, float] | None = None
        # Batches the tuner asked to go unmeasured before the next one it is told of, which
        # stands for them as well.
        self._unmeasured, self._stands_for = 0, 1
        self._busy_seen = 0.0  # the workers' loading time the tuner has been told of
        self._busy_before = 0.0  # ... and theirs in the epoch parts before the current one
        # worker_method="auto": sample the GIL over the first batch and, once a batch shows
        # loading worth workers, the next ones.
        self._gil_wanted = tuner.chooses_method and tuner.probing
        self._gil_armed = self._gil_wanted
        self._gil: GilSampler | None = None
        self._untold_wait: float | None = None  # the probe's last batch, told on the next call

    def measures_next(self) -> bool:
        """Whether the batch about to be handed out is measured (else one unmeasured less)."""
        if self._unmeasured:
            self._unmeasured -= 1
            return False
        return True

    @property
    def has_untold(self) -> bool:
        return self._untold_wait is not None

    def tell_untold(self, called: float, called_cpu: float, epoch_busy: float) -> Setting | None:
        """Tell the tuner of the probe's last batch, the loop having come back for the next
        one at ``called``; returns the change it asks for, to make before that batch loads."""
        waited, self._untold_wait = self._untold_wait, None
        assert waited is not None
        assert self._handed_at is not None
        handed, handed_cpu = self._handed_at
        asked = self._tell(waited, called - handed, called_cpu - handed_cpu, epoch_busy)
        self._handed_at = (called, called_cpu)  # this step is told: the next one starts here
        return asked

    def gil_to_sample(self) -> tuple[GilSampler, float] | None:
        """The GIL sampler and the wait from which it counts, where it should sample the
        batch about to load: the probe's first batch (from when it shows loading worth
        workers), and the next ones once a batch has shown that."""
        if not self._gil_armed:
            return None
        if self._gil is None:
            self._gil = sampler = GilSampler()
            weakref.finalize(self, sampler.stop)
        if not self._gil.wanted:
            return None
        return self._gil, WORTH_SAMPLING_FIRST_S if self._handed_at is None else 0.0

    def observe(
        self, waited: float, called: float, called_cpu: float, epoch_busy: float
    ) -> Setting | None:
        """A measured batch was handed out after ``waited``. While the tuner probes, it is
        told when the loop comes back (``tell_untold``; the first batch only when it shows
        loading worth workers: its wait holds the start-up, which costs more than cheap
        loading). After the probe it is told now, with the step before it: the change it asks
        for is returned, to make once this batch is counted."""
        first = self._handed_at is None
        if self._gil_wanted:  # sample on once a batch shows loading worth workers
            worth = WORTH_SAMPLING_FIRST_S if first else IN_PROCESS_BELOW_S
            self._gil_armed = waited >= worth or (self._gil_armed and not first)
        if self.tuner.probing:
            if not first or waited >= WORTH_SAMPLING_FIRST_S:
                self._untold_wait = waited
            return None
        if first:
            return None
        assert self._handed_at is not None
        step, step_cpu = called - self._handed_at[0], called_cpu - self._handed_at[1]
        return self._tell(waited, step, step_cpu, epoch_busy)

    def handed_out(self) -> None:
        """A batch was handed out: if the next one is measured, its step starts now."""
        if not self._unmeasured:
            self._handed_at = (time.perf_counter(), time.thread_time())

    def part_ended(self, busy: float) -> None:
        """An epoch part (before a change of workers, or a whole epoch of persistent
        workers) ended with its workers busy ``busy`` seconds: the tuner's count goes on."""
        self._busy_before += busy

    def new_epoch(self, busy: float) -> None:
        """The next epoch on the same workers: its first batch is a first batch again."""
        self.part_ended(busy)
        self._handed_at = self._untold_wait = None
        self._unmeasured, self._stands_for = 0, 1

    def stop(self) -> None:
        if self._gil is not None:
            self._gil.stop()

    def _tell(
        self, waited: float, step: float, step_cpu: float, epoch_busy: float
    ) -> Setting | None:
        """One batch for the tuner: the wait for it and the loop's step beside it, with the
        workers' loading time since the last batch told and the GIL's share so far."""
        tuner = self.tuner
        busy_total = self._busy_before + epoch_busy
        busy, self._busy_seen = max(busy_total - self._busy_seen, 0.0), busy_total
        gil = self._gil.held_fraction() if self._gil is not None else None
        asked = tuner.observe(waited, step, step_cpu, busy, gil, batches=self._stands_for)
        self._unmeasured = tuner.unmeasured_between
        self._stands_for = self._unmeasured + 1
        if not tuner.probing:  # the sampler's work is done
            self._gil_wanted = self._gil_armed = False
            self.stop()
            self._gil = None
        return asked
