"""DataLoaderIterator: one pass over a DataLoader's data, an Epoch driven through a transport.

The Epoch (epoch.py) decides what to load, in which order batches come out, and what every
event means; the transport (in_process.py, processes.py, threads.py) moves assignments out and
events back. This class only connects them: it waits (within ``timeout``), hands batches
out (pinned by a background thread where asked), and stops the transport when the epoch
ends or breaks. See docs/design/epoch.md.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
import weakref
from collections.abc import Callable
from typing import Any

from .. import _output, stats
from .._plan import LoadPlan
from .._warn import warn_at_user
from ..timeline import Timeline
from .epoch import Epoch
from .in_process import InProcessTransport
from .lifecycle import WorkerHandle
from .memory import MemoryGuard, cache_bytes, describe
from .pinning import PinStage
from .processes import ProcessTransport
from .threads import ThreadTransport
from .transport import Transport
from .tuner_feed import TunerFeed
from .tuning import Setting, WorkerTuner

__all__ = ["DataLoaderIterator"]

logger = logging.getLogger("flowloader")

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
    if plan.worker_method == "thread" and plan.num_workers:
        return ThreadTransport(plan, base_seed)
    if plan.thread_blocks is not None and plan.num_workers:
        # Thread workers' blocks are of no use to process or Ray workers; the in-process
        # probe of a given memory_budget keeps them for the threads that follow.
        plan.thread_blocks.release()
    if plan.num_workers == 0:
        return InProcessTransport(plan)
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
        tuner: WorkerTuner | None = None,
    ) -> None:
        """``make_transport(plan, base_seed)`` builds the transport (tests script one);
        ``tuner``: num_workers="auto"'s, the loader's across its epochs."""
        if plan.num_workers == 0 and plan.timeout != 0:
            # PyTorch refuses this combination at iter() with the same exception type.
            raise AssertionError(
                f"timeout={plan.timeout} only applies to worker processes; "
                "use timeout=0 with num_workers=0"
            )
        self._worker_cpu: dict[int, float] = {}
        self._pin_stage: PinStage | None = None
        self._make_transport = make_transport
        self._length_hint = length_hint
        # num_workers="auto": the tuner, the stats of this epoch's parts before each change
        # of workers, and when the last batch was handed out (the loop's step starts there).
        self._tuner = tuner
        self._feed = TunerFeed(tuner) if tuner is not None else None
        self._stats_before: list[stats.LoaderStats] = []
        self._retune_to: Setting | None = None  # a change asked for, made after a batch
        self._timeline = (
            Timeline(stats.trace_batches) if stats.enabled and stats.trace_batches > 0 else None
        )
        # memory_budget (memory.py): the guard, and, for a budget the user gave, the workers
        # to start once the first batch, loaded in this process, has been measured.
        guarded = plan.memory_budget > 0 and plan.worker_method != "ray"
        estimate = plan.auto_workers or (plan.memory_budget_given and plan.num_workers > 0)
        self._memory = MemoryGuard(plan.memory_budget, estimate) if guarded else None
        self._memory_warned = False
        self._workers_after_probe: int | None = None
        if guarded and plan.memory_budget_given and plan.num_workers and not plan.iterable:
            self._workers_after_probe = plan.num_workers
            plan = dataclasses.replace(plan, num_workers=0)
        self._epoch = self._new_epoch(plan, length_hint, epoch, resume)
        self._start_transport(plan)
        pinned = _output.pins(plan.output, plan.pin_memory)
        self._convert = _output.converter(plan.output, pinned)
        self._pins = pinned
        self._add_pin_stage(plan)
        self._begin()

    def _start_transport(self, plan: LoadPlan) -> None:
        self._transport = self._make_transport(plan, self._epoch.base_seed)
        self._finalizer = weakref.finalize(
            self, _shutdown_in_owner, os.getpid(), self._transport.shutdown
        )

    def _add_pin_stage(self, plan: LoadPlan) -> None:
        """Pinning runs in a background thread with workers (in-process loading pins in
        line)."""
        wanted = self._convert is not None and self._pins and plan.num_workers > 0
        if wanted and self._pin_stage is None:
            assert self._convert is not None
            self._pin_stage = PinStage(self._convert)

    def _new_epoch(
        self, plan: LoadPlan, length_hint: int | None, number: int, resume: dict[str, Any] | None
    ) -> Epoch:
        self._plan = plan
        self._source_exhausted = False
        if self._pin_stage is not None:
            self._pin_stage.clear()
        workers = plan.num_workers
        budget = self._in_flight_for(plan)
        return Epoch(
            plan,
            number,
            slots=max(workers, 1),
            budget=budget,
            length_hint=length_hint,
            resume=resume,
            max_restarts=plan.max_worker_restarts,
            worker_cpu=self._worker_cpu,
            timeline=self._timeline,
        )

    def _begin(self) -> None:
        epoch, method = self._epoch, self._transport.worker_method
        epoch.stats.worker_method = method
        if self._timeline is not None:
            self._timeline.part(epoch.number, epoch.first_batch, method)
        # Workers start loading ahead; in process, only batches taken over from workers
        # (a live change) are sent now, the rest on demand.
        self._transport.send(self._epoch.assignments(fill=self._transport.prefetches))

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
        """Where the time went since this epoch started (see :mod:`flowloader.stats`); with
        num_workers="auto", over every worker count it ran with, and ``tuning`` says what
        the tuner decided and why."""
        self._epoch.absorb_stages(self._transport.stage_readings())
        now = self._epoch.stats_snapshot()
        memory = self._memory.as_dict() if self._memory is not None else None
        if not self._stats_before:
            now.memory = memory
            if self._tuner is not None:
                now.tuning = self._tuner.as_records()
            return now
        total = stats.LoaderStats.merged([*self._stats_before, now])
        total.num_workers, total.worker_method = now.num_workers, now.worker_method
        # The skip account and the source counts carry on across a change: the latest
        # part's are the epoch's.
        total.sources, total.skipped, total.memory = now.sources, list(now.skipped), memory
        total.tuning = self._tuner.as_records() if self._tuner is not None else []
        return total

    def reset(
        self,
        plan: LoadPlan,
        length_hint: int | None,
        epoch: int,
        resume: dict[str, Any] | None = None,
    ) -> None:
        """Start the next epoch on the same (persistent) workers."""
        if self._feed is not None:
            self._feed.new_epoch(self._epoch.stats.worker_busy_s)
        self._epoch.discard()
        self._stats_before.clear()
        if self._memory is not None:
            self._memory.measure_next_batch()
        self._length_hint = length_hint
        self._epoch = self._new_epoch(plan, length_hint, epoch, resume)
        self._transport.new_epoch()
        self._begin()

    def shutdown(self, grace_s: float | None = None) -> None:
        """Stop the workers now; batches not yet handed out are dropped."""
        if self._feed is not None:
            self._feed.stop()
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
        feed = self._feed
        measured = feed is not None and feed.measures_next()
        timed = stats.enabled or measured
        if timed:
            started, started_cpu = time.perf_counter(), time.thread_time()
            if feed is not None and feed.has_untold and not self.closed:
                busy = self._epoch.stats.worker_busy_s
                self._retune_to = feed.tell_untold(started, started_cpu, busy)
                self._retune_if_asked()
        epoch = self._epoch
        while epoch.skip_batches:  # resuming a stream: load and drop what was delivered
            epoch.skip_batches -= 1
            self._guarded_next()
        produce = self._guarded_next if self._pin_stage is None else self._next_pinned
        if not timed:
            data = produce()
        else:
            sampling = feed.gil_to_sample() if feed is not None else None
            if sampling is not None:
                gil, worth = sampling
                gil.sample(True, worth)
                try:
                    data = produce()
                finally:
                    gil.sample(False)
            else:
                data = produce()
            waited = time.perf_counter() - started
            epoch.count_batch(waited)
            if self._timeline is not None:
                self._timeline.waited(epoch.last_task_id, started, started + waited)
            if measured:
                assert feed is not None
                busy = epoch.stats.worker_busy_s
                self._retune_to = feed.observe(waited, started, started_cpu, busy)
        epoch.delivered()
        memory = self._memory
        if memory is not None and memory.due(self._plan.thread_blocks) and not self.closed:
            self._check_memory(data)
        self._retune_if_asked()
        if feed is not None:
            feed.handed_out()
        if self._pin_stage is not None or self._convert is None:
            return data
        return self._convert(data)

    # -- num_workers="auto" (the tuner decides: tuner_feed.py tells it of each batch) --------

    def _retune_if_asked(self) -> None:
        if self._retune_to is not None:
            setting, self._retune_to = self._retune_to, None
            self._retune(setting)

    # -- memory_budget ----------------------------------------------------------------------

    def _check_memory(self, batch: Any) -> None:
        """Measure the loader's memory (memory.py) with ``batch`` just handed out; keep fewer
        batches in flight, or (num_workers="auto") fewer workers, where the budget asks."""
        guard, plan = self._memory, self._plan
        assert guard is not None
        group = getattr(self._transport, "group", None)
        pids = group.live_pids() if group is not None else []
        segments = group.prefix if group is not None else None
        guard.measure(
            batch,
            pids,
            segments,
            held=self._epoch.in_flight + 1,
            blocks=plan.thread_blocks,
            caches=cache_bytes(plan.dataset),
        )
        try:  # "auto" can always go back to loading in this process
            guard.check_one_fits(with_workers=not plan.auto_workers)
        except Exception:
            self.shutdown(grace_s=0.0)
            raise
        if self._workers_after_probe is not None:  # the first batch measured: start them
            self._retune_to, self._workers_after_probe = Setting(self._workers_after_probe), None
            return  # the new epoch part keeps what fits in flight
        if self._tuner is not None:
            self._tuner.batch_bytes = guard.batch_bytes
            limited = self._tuner.limit(guard.workers_allowed(prefetch=1))
            if limited is not None:
                self._retune_to = limited
                return
        self._epoch.limit_in_flight(self._in_flight_for(plan))

    def _in_flight_for(self, plan: LoadPlan) -> int:
        """The batches ``plan`` keeps in flight: prefetch_factor per worker, or fewer where
        the memory budget says (with one warning, where the settings were the user's)."""
        workers = plan.num_workers
        asked = (plan.prefetch_factor or 1) * workers if workers else 1
        guard = self._memory
        if guard is None or not guard.batch_bytes or not workers:
            return asked
        processes = plan.worker_method != "thread"
        allowed = max(min(asked, guard.in_flight_allowed(workers, processes)), 1)
        if allowed < asked and not plan.auto_workers and not self._memory_warned:
            self._memory_warned = True
            warn_at_user(
                f"memory_budget={describe(guard.budget)}: keeping {allowed} batches in "
                f"flight instead of {asked} (prefetch_factor={plan.prefetch_factor} x "
                f"num_workers={workers}): a batch is {describe(guard.batch_bytes)} and a "
                f"worker holds {describe(guard.each_worker)}"
            )
        return allowed

    def _retune(self, setting: Setting) -> None:
        """Go on with this epoch with ``setting``. A new worker count or kind takes the epoch
        over where it stands (``Epoch.move_to``: a live change, not a resume): the batches
        still loading are loaded again by the new workers, so none is lost, repeated or
        moved, and nothing the user holds (generators, the skip account) is rewound. A new
        prefetch_factor only changes how many batches are kept in flight."""
        plan = self._plan
        workers = setting.num_workers
        method = setting.worker_method or plan.worker_method
        prefetch = setting.prefetch_factor or plan.prefetch_factor
        change = self._tuner.changes[-1] if self._tuner is not None else None
        if change is not None:
            logger.debug(
                "num_workers='auto': %d workers (%s, prefetch_factor=%s): %s",
                workers,
                method,
                prefetch,
                change.reason,
            )
            if self._timeline is not None:
                reason = {"reason": change.reason, **change.measured}
                name = f"num_workers={workers} {method} prefetch_factor={prefetch}"
                self._timeline.instant(time.perf_counter(), name, reason)
        plan = dataclasses.replace(
            plan, num_workers=workers, worker_method=method, prefetch_factor=prefetch
        )
        if workers == self._plan.num_workers and method == self._plan.worker_method:
            self._plan = plan
            self._epoch.set_in_flight(self._in_flight_for(plan))
            return
        epoch = self._epoch
        epoch.absorb_stages(self._transport.stage_readings())
        self._stats_before.append(epoch.stats_snapshot())
        if self._feed is not None:
            self._feed.part_ended(epoch.stats.worker_busy_s)
        self._finalizer()  # the old workers stop; what they had not sent is loaded again
        self._plan = plan
        epoch.move_to(plan, slots=max(workers, 1), budget=self._in_flight_for(plan))
        self._start_transport(plan)
        self._add_pin_stage(plan)
        self._begin()

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
            if transport.prefetches:
                # Also when not found: batches all skipped (skip_errors) free their room
                # without being handed out, and the workers must not go idle behind them.
                transport.send(epoch.assignments())
            if found:
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
        """The epoch ran out: non-persistent workers stop; the pools keep what the next
        epoch's pipeline needs (prefetch_factor per worker, and the loop's batches: the one
        it holds and the one it lets go of as the next arrives)."""
        self._source_exhausted = True
        plan = self._plan
        if not plan.persistent_workers:
            self.shutdown()
        prefetch = plan.prefetch_factor or 1
        if plan.thread_blocks is not None and plan.worker_method == "thread":
            plan.thread_blocks.keep_at_most(prefetch * max(plan.num_workers, 1) + 2)
        trim_pools = getattr(self._transport, "trim_pools", None)
        if plan.persistent_workers and trim_pools is not None and not self.closed:
            trim_pools(prefetch)
