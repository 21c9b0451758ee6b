"""Loading with worker processes: the main process hands out batch indices, keeps at most
``prefetch_factor * num_workers`` batches in flight, and yields them in sampler order.

Batches arrive as views of shared memory; a worker death, a worker exception and a timeout
each surface here as an error that names the worker and the dataset indices concerned.
Shutdown is documented in docs/design/multiprocess.md.
"""

from __future__ import annotations

import time
import weakref
from typing import Any

from .._ipc import messages
from .._ipc.batch_codec import decode
from .._plan import LoadPlan
from ..errors import LoaderTimeoutError, SharedMemoryError, WorkerCrashedError
from .base import NOT_READY, BaseIterator
from .dispatcher import Dispatcher
from .lifecycle import WorkerGroup
from .reorder import ReorderBuffer


class _Lost:
    """In the reorder buffer, in place of a batch that will not come: raise ``error`` there."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


class _Accounted:
    """In the reorder buffer while skip_errors is on: a batch (or None: all its samples were
    skipped) with what the budget needs, accounted when its turn comes."""

    __slots__ = ("batch", "indices", "skipped")

    def __init__(self, batch: Any, indices: Any, skipped: tuple[Any, ...]) -> None:
        self.batch, self.indices, self.skipped = batch, indices, skipped


class MultiProcessIterator(BaseIterator):
    """The num_workers > 0 iterator; reusable across epochs when workers are persistent."""

    def __init__(
        self,
        plan: LoadPlan,
        length_hint: int | None,
        epoch: int = 0,
        resume: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(plan, length_hint, epoch, resume)
        self._generation = 0  # one per pass over the workers; tags tasks and results
        self._workers = WorkerGroup(plan, self._base_seed)
        self._finalizer = weakref.finalize(self, self._workers.shutdown)
        assert plan.prefetch_factor is not None
        self._dispatcher = Dispatcher(plan.num_workers, plan.prefetch_factor * plan.num_workers)
        self._reorder = ReorderBuffer(plan.in_order)
        # Each worker's CPU time so far, as its last result said, and at the epoch's start.
        self._worker_cpu: dict[int, float] = {}
        self._worker_cpu_at_start: dict[int, float] = {}
        self._fill()

    def _in_flight(self) -> int:
        return len(self._dispatcher.outstanding)

    @property
    def closed(self) -> bool:
        """True once the workers are stopped; the iterator cannot be reset any more."""
        return not self._finalizer.alive

    def reset(
        self,
        plan: LoadPlan,
        length_hint: int | None,
        epoch: int,
        resume: dict[str, Any] | None = None,
    ) -> None:
        """Start the next epoch on the same (persistent) workers."""
        self._start_epoch(plan, length_hint, epoch, resume)
        self._worker_cpu_at_start = dict(self._worker_cpu)  # stats count this epoch only
        self._generation += 1
        self._dispatcher.reset()
        self._reorder.reset()
        if plan.iterable:
            for worker_id in range(plan.num_workers):
                self._workers.send(worker_id, messages.Resume())
        self._fill()

    def shutdown(self, stop_grace_s: float | None = None) -> None:
        """Stop the workers now; batches not yet handed out are dropped."""
        self._reorder.reset()  # their arrays pin the segment mappings open
        if stop_grace_s is not None:
            self._workers.shutdown(stop_grace_s)
        self._finalizer()

    def _fill(self) -> None:
        """Hand out tasks until the prefetch budget is used or the sampler is exhausted."""
        while self._dispatcher.has_room():
            worker = self._dispatcher.next_worker()
            if worker is None:
                return
            try:
                indices = self._next_index()
            except StopIteration:
                return
            task_id = self._dispatcher.assign(worker, indices)
            task = messages.Task(self._generation, task_id, indices, epoch_seed=self._base_seed)
            self._workers.send_task(worker, task)

    def _next_data(self, wait: bool = True) -> Any:
        if self._source_exhausted or self.closed:
            raise StopIteration
        timeout = self._plan.timeout
        deadline = time.monotonic() + timeout if timeout > 0 else None
        polled = False
        while True:
            self._workers.collect_dropped()
            found, item = self._reorder.pop()
            if found:
                self._fill()  # releases ride along with the tasks
                if isinstance(item, _Accounted):
                    item = self._accounted(item)
                    if item is None:
                        continue
                if isinstance(item, messages.Failure):
                    raise item.error.rebuild()
                if isinstance(item, _Lost):
                    self._fail(item.error)
                return item
            if self._dispatcher.idle():
                self._end_epoch()
                raise StopIteration
            if not wait:
                if polled:
                    return NOT_READY
                polled = True
                self._receive(0.0)  # take what has already arrived, without waiting
                continue
            self._workers.send_releases()  # about to wait: let no worker wait for segments
            self._collect(deadline)

    def _accounted(self, item: _Accounted) -> Any:
        """The batch, after counting its skipped samples; None for a batch all skipped."""
        try:
            self._account(item.indices, item.skipped, empty=item.batch is None)
        except Exception as error:  # past the skip budget: the epoch ends here
            self._fail(error)
        return item.batch

    def _end_epoch(self) -> None:
        self._source_exhausted = True
        if not self._plan.persistent_workers:
            self.shutdown()

    def _collect(self, deadline: float | None) -> None:
        """Handle the messages that arrive before ``deadline`` (None: no limit)."""
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            self._fail(self._timeout_error())
        self._receive(remaining)

    def _receive(self, timeout: float | None) -> None:
        """Handle the messages that arrive within ``timeout``, and any worker's death."""
        received, dead = self._workers.receive(timeout)
        for message in received:
            self._handle(message)
        for worker_id in dead:
            self._lose_worker(worker_id)

    def _lose_worker(self, worker_id: int) -> None:
        """A worker died. Every batch it finished was read above; the error takes the place of
        the first batch it lost (or of the next batch to be handed out, if it held none), so
        every batch before that in sampler order, other workers' included, comes out first."""
        error = self._crash_error(worker_id)
        lost = self._dispatcher.abandon(worker_id)
        self._reorder.add(lost[0] if lost else self._dispatcher.next_task_id, _Lost(error))

    def _handle(self, message: Any) -> None:
        stale = message.generation != self._generation
        if isinstance(message, messages.Result):
            self._workers.cache.forget(message.retired_segments)
            name = message.batch.segment_name
            if stale:
                if name is not None:
                    self._workers.send(message.worker_id, messages.Release((name,)))
                return
            self._stats.in_flight_total += len(self._dispatcher.outstanding)
            _, indices = self._dispatcher.complete(message.task_id)
            self._absorb_stages(message.stages)
            self._worker_cpu[message.worker_id] = message.cpu_s
            start = self._worker_cpu_at_start
            self._stats.worker_cpu_s = sum(
                cpu - start.get(worker, 0.0) for worker, cpu in self._worker_cpu.items()
            )
            try:
                on_drop = self._workers.on_drop(message.worker_id)
                batch = decode(message.batch, self._workers.cache, on_drop)
            except SharedMemoryError as error:  # out of descriptors or mappings: says which
                self._workers.send(message.worker_id, messages.Release((name,)))
                batch = _Lost(error)
            if self._ledger is not None:
                batch = _Accounted(batch, indices, message.skipped)
            self._reorder.add(message.task_id, batch)
        elif stale:
            return
        elif isinstance(message, messages.Failure):
            self._dispatcher.complete(message.task_id)
            self._reorder.add(message.task_id, message)
        elif isinstance(message, messages.Empty):
            _, indices = self._dispatcher.complete(message.task_id)
            self._reorder.add(message.task_id, _Accounted(None, indices, message.skipped))
        elif isinstance(message, messages.StreamEnd):
            self._dispatcher.complete(message.task_id)
            self._dispatcher.deactivate(message.worker_id)
            self._reorder.skip(message.task_id)

    def _fail(self, error: Exception) -> None:
        self.shutdown(stop_grace_s=0.0)
        raise error

    def _crash_error(self, worker_id: int) -> WorkerCrashedError:
        pid, how = self._workers.exit_description(worker_id)
        pending = self._dispatcher.pending(worker_id)
        hint = ""
        if "SIGBUS" in how:
            hint = " A bus error usually means shared memory (/dev/shm) ran out."
        elif "SIGKILL" in how:
            hint = " SIGKILL often comes from the kernel's out-of-memory killer."
        return WorkerCrashedError(
            f"DataLoader worker {worker_id} (pid {pid}) exited unexpectedly ({how}) with "
            f"{len(pending)} batch(es) in flight; their dataset indices: {pending}.{hint}"
        )

    def _timeout_error(self) -> LoaderTimeoutError:
        pending = {w: self._dispatcher.pending(w) for w in range(self._plan.num_workers)}
        by_worker = {w: indices for w, indices in pending.items() if indices}
        return LoaderTimeoutError(
            f"DataLoader timed out after {self._plan.timeout} seconds waiting for a batch; "
            f"dataset indices still pending, by worker: {by_worker}"
        )
