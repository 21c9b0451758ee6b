"""Worker processes (``worker_method="multiprocessing"``, the default): tasks and small
messages on pipes, batches in shared-memory segments that the main process maps once and
reads as views. The WorkerGroup (lifecycle.py) runs the processes; the SegmentLedger
(_ipc/ledger.py) keeps this process's side of their segments; this module connects the two
and turns what the workers send into the Epoch's events."""

from __future__ import annotations

import threading
from typing import Any

from .._ipc import messages
from .._ipc.batch_codec import EncodedBatch, held_segments
from .._ipc.ledger import SegmentLedger
from .._plan import LoadPlan
from .events import Assignment, Event, Failed, Loaded, WorkerDied, from_reply
from .lifecycle import WorkerGroup
from .transport import STOP_GRACE_S

# Between epochs, how often the batches the loop kept of the last epoch are looked at: those
# it has let go of go back to their workers, which retire them beyond the next epoch's needs.
BETWEEN_EPOCHS_POLL_S = 0.2


class ProcessTransport:
    prefetches = True
    worker_method = "process"

    def __init__(self, plan: LoadPlan, base_seed: int) -> None:
        self._iterable = plan.iterable
        self.group = WorkerGroup(plan, base_seed)
        self.ledger = SegmentLedger(self.group.worker_prefix)
        self._generation = 0  # one per epoch on these workers; tags tasks and results
        # Between epochs, the thread that gives back what the loop lets go of, and its stop
        # (joined before the main thread sends anything again).
        self._between: tuple[threading.Thread, threading.Event] | None = None

    def send(self, assignments: list[Assignment]) -> None:
        group, ledger = self.group, self.ledger
        ledger.collect_dropped()  # releases ride along with the tasks
        for a in assignments:
            releases = ledger.releases_for(a.worker_id)
            # a Task as it travels (messages.Task.on_wire): its fields in order
            task = (
                self._generation,
                a.task_id,
                a.indices,
                releases,
                a.epoch_seed,
                a.epoch,
                a.batch,
            )
            group.send(a.worker_id, task)

    def receive(self, timeout: float | None) -> list[Event]:
        group = self.group
        self.ledger.collect_dropped()
        received, dead = group.receive(0.0)
        if not (received or dead) and (timeout is None or timeout > 0):
            # About to wait: let no worker wait for segments. (When replies are already
            # here, the releases ride on the next tasks instead: a message less per batch.)
            for worker_id, names in self.ledger.owed():
                group.send(worker_id, messages.Release(names))
            received, dead = group.receive(timeout)
        events = []
        for message in received:
            try:
                event = self._event(message)
            except Exception as error:  # this message is lost; the others are not
                event = self._unopened(message, error)
            if event is not None:
                events.append(event)
        for worker_id in dead:
            events.append(WorkerDied(worker_id, *group.exit_description(worker_id)))
        return events

    def _event(self, message: Any) -> Event | None:
        if type(message) is tuple:  # a Result as it travels (messages.Result.on_wire)
            generation, task_id, worker_id, encoded, retired, stages, cpu_s, skipped, marks = (
                message
            )
            if retired:
                self.ledger.forget(retired)
            if generation != self._generation:  # from an epoch that ended early
                self._give_back(worker_id, encoded)
                return None
            batch = self.ledger.open(worker_id, encoded)
            return Loaded(task_id, worker_id, batch, skipped, stages, cpu_s, marks)
        return None if message.generation != self._generation else from_reply(message)

    def _unopened(self, message: Any, error: Exception) -> Event | None:
        """A reply that could not be opened here (out of descriptors or mappings, a segment
        gone, a class this process cannot rebuild): its batch fails and ends the epoch, and
        its segment goes back to the worker."""
        if type(message) is tuple:
            message = messages.Result(*message)
            self._give_back(message.worker_id, message.batch)
        if message.generation != self._generation:
            return None
        return Failed(message.task_id, message.worker_id, error, fatal=True)

    def _give_back(self, worker_id: int, encoded: tuple[Any, ...]) -> None:
        name = EncodedBatch(*encoded).segment_name
        if name is not None:
            self.group.send(worker_id, messages.Release((name,)))

    def restart(self, worker_id: int) -> None:
        old_prefix = self.group.worker_prefix(worker_id)
        self.group.restart(worker_id)
        self.ledger.worker_replaced(worker_id, old_prefix)

    def new_epoch(self) -> None:
        self._stop_giving_back()
        self._generation += 1
        if self._iterable:
            for worker_id in range(len(self.group.processes)):
                self.group.send(worker_id, messages.Resume())

    def trim_pools(self, prefetch_factor: int) -> None:
        """Between epochs (nothing in flight): each worker keeps ``prefetch_factor``
        segments, worker 0 one more, the batches the loop holds included; the rest are
        unmapped here now and retired by their worker when it reads the message (after the
        releases owed to it, sent first). Batches the loop still holds are given back the
        same way as it lets go of them, until the next epoch begins (no task carries their
        releases before then)."""
        self._stop_giving_back()
        self._trim(prefetch_factor)
        if self._holds_batches():
            stop = threading.Event()
            thread = threading.Thread(
                target=self._give_back_between_epochs,
                args=(prefetch_factor, stop),
                name="flowloader-between-epochs",
                daemon=True,
            )
            self._between = (thread, stop)
            thread.start()

    def _trim(self, prefetch_factor: int) -> None:
        group, ledger = self.group, self.ledger
        for worker_id, names in ledger.owed():
            group.send(worker_id, messages.Release(names))
        for worker_id, process in enumerate(group.processes):
            if process is None:
                continue
            keep = prefetch_factor + (worker_id == 0)
            extra = ledger.beyond(group.worker_prefix(worker_id), keep)
            if extra:
                group.send(worker_id, messages.Retire(extra))
                ledger.forget(extra)

    def _holds_batches(self) -> bool:
        """Whether the program holds some batch in these workers' segments."""
        prefix = self.group.prefix
        return any(name.startswith(prefix) for name in held_segments())

    def _give_back_between_epochs(self, prefetch_factor: int, stop: threading.Event) -> None:
        """The thread's body: trim again whenever the loop has let go of a batch, until it
        holds none (one more pass then: a batch's drop is noted just after it stops being
        held) or the next epoch (or the shutdown) stops it."""
        last_pass = False
        while not stop.wait(BETWEEN_EPOCHS_POLL_S):
            holding = self._holds_batches()
            try:
                if self.ledger.has_dropped():
                    self._trim(prefetch_factor)
            except (OSError, EOFError, ValueError):  # a worker or its pipe gone
                return
            if last_pass and not holding:
                return
            last_pass = not holding

    def _stop_giving_back(self) -> None:
        """Stop the between-epochs thread, once it has finished what it was sending (not
        joined from itself: a garbage collection there may run the iterator's finalizer)."""
        between, self._between = self._between, None
        if between is None:
            return
        thread, stop = between
        stop.set()
        if thread is not threading.current_thread():
            thread.join()

    def stage_readings(self) -> dict[str, float] | None:
        return None

    def shutdown(self, grace_s: float | None = None) -> None:
        self._stop_giving_back()
        self.group.shutdown(STOP_GRACE_S if grace_s is None else grace_s)
        self.ledger.close()
