"""DataLoaderIterator: one pass over a DataLoader's data, an Epoch driven through a transport.

The Epoch (epoch.py) decides what to load, in which order batches come out, and what every
event means; the transport (in_process.py, processes.py, threads.py) moves assignments out and
events back. This class only connects them: it waits (within ``timeout``), hands batches
out (pinned by a background thread where asked), and stops the transport when the epoch
ends or breaks. See docs/design/epoch.md.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable
from typing import Any

from .. import _output, stats
from .._plan import LoadPlan
from .._warn import warn_at_user
from .epoch import Epoch
from .in_process import InProcessTransport
from .lifecycle import WorkerHandle
from .pinning import PinStage
from .processes import ProcessTransport
from .threads import ThreadTransport
from .transport import Transport

__all__ = ["DataLoaderIterator"]

_NOT_READY = object()


def _shutdown_in_owner(owner_pid: int, shutdown: Callable[[], None]) -> None:
    """The finalizer's body. A forked worker inherits its parent's heap, garbage included;
    when the child's collector frees an iterator of the parent, stopping the parent's workers
    from there must not happen (pipes it shares with them, processes it did not start)."""
    if os.getpid() == owner_pid:
        shutdown()


def default_transport(plan: LoadPlan, base_seed: int) -> Transport:
    """In-process without workers; else worker processes, or threads or Ray actors where
    asked (Ray is imported only then)."""
    if plan.num_workers == 0:
        return InProcessTransport(plan)
    if plan.worker_method == "thread":
        return ThreadTransport(plan, base_seed)
    if plan.worker_method == "ray":
        from .ray_transport import RayTransport

        return RayTransport(plan, base_seed)
    return ProcessTransport(plan, base_seed)


class DataLoaderIterator:
    """What ``iter(loader)`` returns: batches in sampler order, plus ``state_dict()`` (where
    this epoch stands, for resuming) and ``stats()`` (where its time went).

    With persistent workers the same iterator serves every epoch (``iter(loader)`` resets
    it); otherwise its workers stop when its epoch ends.
    """

    def __init__(
        self,
        plan: LoadPlan,
        length_hint: int | None,
        epoch: int = 0,
        resume: dict[str, Any] | None = None,
        make_transport: Callable[[LoadPlan, int], Transport] = default_transport,
    ) -> None:
        """``make_transport(plan, base_seed)`` builds the transport (tests script one)."""
        if plan.num_workers == 0 and plan.timeout != 0:
            # PyTorch refuses this combination at iter() with the same exception type.
            raise AssertionError(
                f"timeout={plan.timeout} only applies to worker processes; "
                "use timeout=0 with num_workers=0"
            )
        self._worker_cpu: dict[int, float] = {}
        self._pin_stage: PinStage | None = None
        self._epoch = self._new_epoch(plan, length_hint, epoch, resume)
        self._transport = make_transport(plan, self._epoch.base_seed)
        self._finalizer = weakref.finalize(
            self, _shutdown_in_owner, os.getpid(), self._transport.shutdown
        )
        pinned = _output.pins(plan.output, plan.pin_memory)
        self._convert = _output.converter(plan.output, pinned)
        if self._convert is not None and pinned and plan.num_workers > 0:
            self._pin_stage = PinStage(self._convert)  # in-process loading pins in line
        self._begin()

    def _new_epoch(
        self, plan: LoadPlan, length_hint: int | None, number: int, resume: dict[str, Any] | None
    ) -> Epoch:
        self._plan = plan
        self._source_exhausted = False
        if self._pin_stage is not None:
            self._pin_stage.clear()
        workers = plan.num_workers
        budget = (plan.prefetch_factor or 1) * workers if workers else 1
        return Epoch(
            plan,
            number,
            slots=max(workers, 1),
            budget=budget,
            length_hint=length_hint,
            resume=resume,
            max_restarts=plan.max_worker_restarts,
            worker_cpu=self._worker_cpu,
        )

    def _begin(self) -> None:
        self._epoch.stats.worker_method = self._transport.worker_method
        if self._transport.prefetches:
            self._transport.send(self._epoch.assignments())

    # -- the public face ------------------------------------------------------------------

    @property
    def position(self) -> Any:
        """The epoch's position (its DataLoader keeps it for ``state_dict()``)."""
        return self._epoch.position

    @property
    def _workers(self) -> list[Any]:
        """The worker processes (torch's iterator has them under this name, and its users'
        tests join them after an epoch); empty for threads and in-process loading."""
        group = getattr(self._transport, "group", None)
        if group is None:
            return []
        return [WorkerHandle(p, group) for p in group.processes if p is not None]

    @property
    def exhausted(self) -> bool:
        """True once the epoch's last batch was handed out (not merely loaded)."""
        return self._epoch.position.exhausted

    @property
    def closed(self) -> bool:
        """True once the workers are stopped; the iterator cannot be reset any more."""
        return not self._finalizer.alive

    def state_dict(self) -> dict[str, Any]:
        """Where this epoch stands: enough to continue it in a new loader (see DataLoader)."""
        return self._epoch.position.state()

    def stats(self) -> stats.LoaderStats:
        """Where the time went since this epoch started (see :mod:`flowloader.stats`)."""
        self._epoch.absorb_stages(self._transport.stage_readings())
        return self._epoch.stats_snapshot()

    def reset(
        self,
        plan: LoadPlan,
        length_hint: int | None,
        epoch: int,
        resume: dict[str, Any] | None = None,
    ) -> None:
        """Start the next epoch on the same (persistent) workers."""
        self._epoch.discard()
        self._epoch = self._new_epoch(plan, length_hint, epoch, resume)
        self._transport.new_epoch()
        self._begin()

    def shutdown(self, grace_s: float | None = None) -> None:
        """Stop the workers now; batches not yet handed out are dropped."""
        self._epoch.discard()  # their arrays pin the segment mappings open
        if grace_s is not None:
            self._transport.shutdown(grace_s)
        self._finalizer()

    def __iter__(self) -> DataLoaderIterator:
        return self

    def __len__(self) -> int:
        return len(self._plan.index_sampler)

    def __getstate__(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} cannot be pickled")

    # -- handing out batches --------------------------------------------------------------

    def __next__(self) -> Any:
        epoch = self._epoch
        while epoch.skip_batches:  # resuming a stream: load and drop what was delivered
            epoch.skip_batches -= 1
            self._guarded_next()
        produce = self._guarded_next if self._pin_stage is None else self._next_pinned
        if not stats.enabled:
            data = produce()
        else:
            started = time.perf_counter()
            data = produce()
            epoch.count_batch(time.perf_counter() - started)
        epoch.delivered()
        if self._pin_stage is not None or self._convert is None:
            return data
        return self._convert(data)

    def _guarded_next(self) -> Any:
        try:
            return self._next_data()
        except StopIteration:
            self._epoch.end()
            raise

    def _next_pinned(self) -> Any:
        """The oldest pinned batch. Before waiting for it, every batch that has already arrived
        goes to the pinning thread (up to its depth), so that its copy overlaps the training
        step; an error takes its batch's place in the order."""
        stage = self._pin_stage
        assert stage is not None
        wait = not stage
        while stage.has_room() and not self._source_exhausted:
            try:
                batch = self._next_data(wait=wait)
            except StopIteration:
                self._source_exhausted = True
                break
            except Exception as error:
                stage.submit_error(error)
                break
            if batch is _NOT_READY:
                break
            stage.submit(batch)
            wait = False
        if not stage:
            self._epoch.end()
            raise StopIteration
        return stage.take()

    def _next_data(self, wait: bool = True) -> Any:
        """The next batch; with ``wait=False``, _NOT_READY unless it has already arrived."""
        if self._source_exhausted or self.closed:
            raise StopIteration
        epoch, transport = self._epoch, self._transport
        timeout = self._plan.timeout
        deadline = time.monotonic() + timeout if timeout > 0 else None
        polled = False
        while True:
            try:
                found, batch = epoch.pop()
            except BaseException:
                if epoch.broken:
                    self.shutdown(grace_s=0.0)
                elif transport.prefetches:
                    # The epoch goes on past a failed batch: its slot is free for the next.
                    transport.send(epoch.assignments())
                raise
            if found:
                if transport.prefetches:
                    transport.send(epoch.assignments())
                return batch
            if epoch.idle():
                if not transport.prefetches:  # in-process: load on demand
                    transport.send(epoch.assignments())
                if epoch.idle():
                    self._end_epoch()
                    raise StopIteration
            if not wait:
                if polled:
                    return _NOT_READY
                polled = True
                self._receive(0.0)  # take what has already arrived, without waiting
                continue
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                waiting_for = getattr(transport, "waiting_for", None)  # Ray: unplaced actors
                error = epoch.timeout_error(waiting_for() if waiting_for else "")
                self.shutdown(grace_s=0.0)
                raise error
            self._receive(remaining)

    def _receive(self, timeout: float | None) -> None:
        epoch, transport = self._epoch, self._transport
        notices = []
        for event in transport.receive(timeout):
            restart = epoch.handle(event)
            if restart is not None:
                try:
                    transport.restart(restart.worker_id)
                except Exception as error:  # fork or thread start failed: the death stands
                    epoch.restart_failed(restart.death, error)
                    continue
                notices.append(epoch.restarted(restart.death))
                transport.send(epoch.assignments(fill=False))
        # Warned once every event is taken: a warning raised as an error loses nothing.
        for notice in notices:
            warn_at_user(notice, RuntimeWarning)

    def _end_epoch(self) -> None:
        self._source_exhausted = True
        if not self._plan.persistent_workers:
            self.shutdown()
