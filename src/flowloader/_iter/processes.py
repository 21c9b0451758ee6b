"""Worker processes (``worker_method="multiprocessing"``, the default): tasks and small
messages on pipes, batches in shared-memory segments that the main process maps once and
reads as views. The segment ledger (mappings, releases, retired segments) lives in the
WorkerGroup (lifecycle.py); this module turns its messages into the Epoch's events."""

from __future__ import annotations

from typing import Any

from .._ipc import messages
from .._ipc.batch_codec import decode
from .._plan import LoadPlan
from ..errors import SharedMemoryError
from .events import Assignment, Event, Failed, WorkerDied, from_reply
from .lifecycle import STOP_GRACE_S, WorkerGroup


class ProcessTransport:
    prefetches = True
    worker_method = "process"

    def __init__(self, plan: LoadPlan, base_seed: int) -> None:
        self._iterable = plan.iterable
        self.group = WorkerGroup(plan, base_seed)
        self._generation = 0  # one per epoch on these workers; tags tasks and results

    @property
    def closed(self) -> bool:
        return self.group.closed

    def send(self, assignments: list[Assignment]) -> None:
        group = self.group
        group.collect_dropped()  # releases ride along with the tasks
        for a in assignments:
            task = messages.Task(self._generation, a.task_id, a.indices, epoch_seed=a.epoch_seed)
            group.send_task(a.worker_id, task)

    def receive(self, timeout: float | None) -> list[Event]:
        group = self.group
        group.collect_dropped()
        if timeout is None or timeout > 0:
            group.send_releases()  # about to wait: let no worker wait for its segments
        received, dead = group.receive(timeout)
        events = [event for m in received if (event := self._event(m)) is not None]
        for worker_id in dead:
            events.append(WorkerDied(worker_id, *group.exit_description(worker_id)))
        return events

    def _event(self, message: Any) -> Event | None:
        group = self.group
        stale = message.generation != self._generation
        if isinstance(message, messages.Result):
            group.cache.forget(message.retired_segments)
            name = message.batch.segment_name
            if stale:  # from an epoch that ended early: give its segment back
                if name is not None:
                    group.send(message.worker_id, messages.Release((name,)))
                return None
            try:
                batch = decode(message.batch, group.cache, group.on_drop(message.worker_id))
            except SharedMemoryError as error:  # out of descriptors or mappings: says which
                group.send(message.worker_id, messages.Release((name,)))
                return Failed(message.task_id, message.worker_id, error, fatal=True)
            return from_reply(message, batch)
        return None if stale else from_reply(message)

    def restart(self, worker_id: int) -> None:
        self.group.restart(worker_id)

    def new_epoch(self) -> None:
        self._generation += 1
        if self._iterable:
            for worker_id in range(len(self.group.processes)):
                self.group.send(worker_id, messages.Resume())

    def stage_readings(self) -> dict[str, float] | None:
        return None

    def shutdown(self, grace_s: float | None = None) -> None:
        self.group.shutdown(STOP_GRACE_S if grace_s is None else grace_s)
