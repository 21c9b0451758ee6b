"""Epoch: the rules of one pass over a DataLoader's data, as a pure object.

It draws the sampler's indices and hands them out as assignments (round-robin, within the
prefetch budget), takes what the transport reports as typed events, and hands batches out in
sampler order (or as they come, ``in_order=False``). It keeps the position ``state_dict()``
reports, the skip_errors account, the stats, where a worker's death surfaces, and which
deaths a restart absorbs. It never touches a pipe, a thread or a process, so every one of
those rules is tested by feeding it events (tests/unit/test_epoch.py).
"""

from __future__ import annotations

import collections
import itertools
import signal
import time
from collections.abc import Iterator
from typing import Any

from .. import _seed, _state, stats
from .._plan import LoadPlan
from .._skip import SkipLedger
from .._warn import warn_at_user
from ..errors import LoaderTimeoutError, WorkerCrashedError
from ..timeline import Timeline
from .dispatcher import Dispatcher
from .events import Assignment, Emptied, Event, Failed, Loaded, Restart, StreamEnded, WorkerDied
from .reorder import ReorderBuffer
from .source_counts import SourceCounts

_END = object()


def _who(event: WorkerDied) -> str:
    if event.who is not None:
        return event.who
    return f"pid {event.pid}" if event.pid is not None else "a thread"


def _torch_words(event: WorkerDied) -> str:
    """torch's own sentence for a dead worker, so that searching the error finds its answers."""
    if event.pid is not None and event.signal is not None:
        return f"DataLoader worker (pid {event.pid}) is killed by signal: " + (
            signal.strsignal(event.signal) or str(event.signal)
        )
    return f"DataLoader worker ({_who(event)}) exited unexpectedly"


def _grouped(samples: Iterator[Any], size: int, drop_last: bool) -> Iterator[list[Any]]:
    """``samples`` in lists of ``size`` (BatchSampler's grouping of what is left)."""
    while batch := list(itertools.islice(samples, size)):
        if drop_last and len(batch) < size:
            return
        yield batch


class _Accounted:
    """In the reorder buffer while skip_errors is on: a batch (None: all its samples were
    skipped) with what the skip account needs, counted when its turn comes."""

    __slots__ = ("batch", "indices", "skipped")

    def __init__(self, batch: Any, indices: Any, skipped: tuple[Any, ...]) -> None:
        self.batch, self.indices, self.skipped = batch, indices, skipped


class _Raise:
    """In the reorder buffer in place of a batch: raise ``error`` at its turn."""

    __slots__ = ("error", "fatal")

    def __init__(self, error: BaseException, fatal: bool) -> None:
        self.error, self.fatal = error, fatal


class Epoch:
    """One epoch of ``plan`` over ``slots`` workers (1 for in-process loading).

    ``resume``: a ``state_dict()`` to continue from. ``worker_cpu``: each worker's CPU seconds
    as last reported, shared by the epochs of persistent workers (stats count this epoch's).
    """

    def __init__(
        self,
        plan: LoadPlan,
        number: int,
        *,
        slots: int,
        budget: int,
        length_hint: int | None = None,
        resume: dict[str, Any] | None = None,
        max_restarts: int = 0,
        worker_cpu: dict[int, float] | None = None,
        timeline: Timeline | None = None,
    ) -> None:
        self.plan = plan
        self.number = number
        self.length_hint = length_hint
        self.max_restarts = max_restarts
        self.restarts = 0
        # True once an error ended the epoch: the transport must stop.
        self.broken = False
        self._stream_restored = False
        self._regroup_after: int | None = None  # samples read in another batch size
        skip = self._restore(plan, resume)
        # Everything this epoch's order depends on, as it is before the first draw.
        self.position = _state.Position(
            plan,
            number,
            generator=_state.generator_state(plan.generator),
            sampler=_state.sampler_state(plan.index_sampler),
        )
        # Drawn every epoch, with or without workers, so that the sampler's draws (which may
        # share the generator) are the same whatever num_workers and persistent_workers are.
        # Every sample's generator this epoch derives from it (SampleSeeds, in the workers).
        self.base_seed = _seed.draw_seed(plan.generator)
        self._sampler_iter = iter(plan.index_sampler)
        # Stream batches to load and drop before the first one handed out (resuming).
        self.skip_batches = 0
        if skip:
            self._resume_position(skip)
        elif self._regroup_after is not None:
            self._regroup(self._regroup_after)
        # The epoch's batch that task id 0 is (a resume's first): task ids count on from it
        # across live changes of workers.
        self.first_batch = self.position.batches_yielded
        # Batch numbers (batch_number): task id t is the epoch's batch first + t * step.
        self._numbering = (self.first_batch - self.skip_batches, 1)
        if self._regroup_after is not None:
            self._numbering = (self._regroup_after, plan.index_sampler.batch_size)
        self._dispatcher = Dispatcher(slots, budget)
        self._reorder = ReorderBuffer(plan.in_order)
        self._retries: collections.deque[Assignment] = collections.deque()
        self._timeline = timeline
        # The skip_errors account, kept only where the policy is on (no cost otherwise).
        self._ledger = SkipLedger(plan.max_skipped) if plan.skip_errors else None
        # Per-source counts of a mixture's samples handed out (stats().sources).
        self._sources = SourceCounts.of(plan.dataset)
        self._worker_cpu = worker_cpu if worker_cpu is not None else {}
        self._start_part()

    def _start_part(self) -> None:
        """Begin this epoch's statistics for the workers it runs on now (the first part, or
        the part after a live change of workers)."""
        self.stats = stats.LoaderStats(num_workers=self.plan.num_workers, timeline=self._timeline)
        if self._ledger is not None:
            self.stats.skipped = self._ledger.skipped
        self._cpu_at_start = dict(self._worker_cpu)
        self._started_at = time.perf_counter()
        self._main_cpu_at_start = time.process_time()

    def move_to(self, plan: LoadPlan, slots: int, budget: int) -> None:
        """Go on with this epoch on other workers (``plan``'s): a live change, not a
        resume. The sampler's remaining order, the per-sample seeds, the skip account, the
        batches that arrived and the position all carry on; only the batches still loading
        on the old workers are handed to the new ones, under their own task ids, so that
        every batch comes out once and in its place. Nothing is rewound or restored (the
        user's generators, the sampler's state), and no position is needed, so it works
        with ``in_order=False``. The statistics start a new part."""
        lost = sorted(self._dispatcher.outstanding.items())
        next_task_id = self._dispatcher.next_task_id
        self.plan = plan
        self.position.plan = plan
        dispatcher = self._dispatcher = Dispatcher(slots, budget)
        dispatcher.next_task_id = next_task_id
        self._retries.clear()  # a restarted worker's batches are among the lost
        for task_id, (_, indices) in lost:
            worker = dispatcher.adopt(task_id, indices)
            self._retries.append(self._assignment(worker, task_id, indices))
        self._start_part()

    # -- resuming -------------------------------------------------------------------------

    def _restore(self, plan: LoadPlan, resume: dict[str, Any] | None) -> int:
        """Put the generator, the sampler (and an in-process stream) where ``resume`` says;
        returns the batches still to pass over."""
        if resume is None:
            return 0
        resume = _state.expanded(resume)  # the sampler's reference to the loader's generator
        _state.restore_generator(plan.generator, resume["generator"])
        if resume["sampler"] is not None and _state.same_samplers(plan, resume):
            plan.index_sampler.load_state_dict(resume["sampler"])
        skip = resume["batches_yielded"]
        if not plan.iterable and _state.skip_in_sampler(plan.index_sampler, resume):
            return 0  # the sampler itself now begins after what was delivered
        if not plan.iterable and _state.needs_regrouping(plan, resume):
            self._regroup_after = _state.samples_read(resume)
            return 0
        saved = resume.get("dataset")
        restore = getattr(plan.dataset, "load_state_dict", None)
        if plan.iterable and saved is not None and plan.num_workers == 0 and callable(restore):
            # The stream restores its own position, before iter() starts it: no fast-forward.
            restore(saved)
            self._stream_restored = True
        return skip

    def _resume_position(self, skip: int) -> None:
        """Continue after ``skip`` batches: a map-style epoch passes over their indices
        without loading anything; a stream has no indices, so its batches are loaded and
        dropped (unless it restored its own position)."""
        if self.plan.iterable:
            self.skip_batches = 0 if self._stream_restored else skip
        else:
            for _ in range(skip):
                if next(self._sampler_iter, _END) is _END:
                    break
        self.position.batches_yielded = skip

    def _regroup(self, read: int) -> None:
        """Continue after ``read`` samples of the wrapped sampler's order, in batches of this
        loader's size (a resume with another batch size): the positions read stay a prefix,
        so nothing is lost or repeated."""
        batch_sampler = self.plan.index_sampler
        samples = iter(batch_sampler.sampler)
        for _ in itertools.islice(samples, read):
            pass
        self._sampler_iter = _grouped(samples, batch_sampler.batch_size, batch_sampler.drop_last)
        self.position.samples_before = read

    def batch_number(self, task_id: int) -> int:
        """The number of task ``task_id``'s batch in the epoch (``Assignment.batch``: with
        the epoch seed, the seed of ``flowloader.batching.batch_rng``): its place among the
        epoch's batches, as the uninterrupted run counts it (a stream's dropped batches and
        skipped ones included); in a rest regrouped into another batch size, the place of
        its first sample in the epoch's order (``flowloader.batching.batch_generator``)."""
        first, step = self._numbering
        return first + task_id * step

    # -- handing out work -----------------------------------------------------------------

    def assignments(self, fill: bool = True) -> list[Assignment]:
        """What to send now: the batches of a restarted worker first, then (``fill``) new
        batches until the prefetch budget is used or the sampler is exhausted."""
        sent = list(self._retries)
        self._retries.clear()
        dispatcher = self._dispatcher
        while fill and dispatcher.has_room():
            worker = dispatcher.next_worker()
            if worker is None:
                break
            indices = next(self._sampler_iter, _END)
            if indices is _END:
                break
            task_id = dispatcher.assign(worker, indices)
            sent.append(self._assignment(worker, task_id, indices))
        return sent

    def _assignment(self, worker: int, task_id: int, indices: Any) -> Assignment:
        number = self.batch_number(task_id)
        return Assignment(worker, task_id, indices, self.base_seed, self.number, number)

    def idle(self) -> bool:
        """Nothing is in flight: no batch will arrive unless more are handed out."""
        return self._dispatcher.idle()

    @property
    def in_flight(self) -> int:
        return len(self._dispatcher.outstanding)

    # -- events ---------------------------------------------------------------------------

    def handle(self, event: Event) -> Restart | None:
        """Take one event; a Restart when the transport must replace a dead worker."""
        match event:
            case Loaded(task_id=task_id):
                self.stats.in_flight_total += len(self._dispatcher.outstanding)
                _, indices = self._dispatcher.complete(task_id)
                self.absorb_stages(event.stages)
                if self._timeline is not None and event.marks is not None:
                    received = time.perf_counter()
                    self._timeline.loaded(task_id, event.worker_id, event.marks, received)
                if event.cpu_s is not None:
                    self._note_cpu(event.worker_id, event.cpu_s)
                item = event.batch
                if self._ledger is not None:
                    item = _Accounted(item, indices, event.skipped)
                if self._sources is not None:
                    self._sources.loaded(task_id, indices, event.skipped)
                self._reorder.add(task_id, item)
            case Emptied(task_id=task_id, skipped=skipped):
                _, indices = self._dispatcher.complete(task_id)
                self._reorder.add(task_id, _Accounted(None, indices, skipped))
            case Failed(task_id=task_id, error=error, fatal=fatal):
                self._dispatcher.complete(task_id)
                self._reorder.add(task_id, _Raise(error, fatal))
            case StreamEnded(task_id=task_id, worker_id=worker_id):
                self._dispatcher.complete(task_id)
                self._dispatcher.deactivate(worker_id)
                self._reorder.skip(task_id)
                self.position.ahead = self._reorder.ahead
            case WorkerDied():
                return self._worker_died(event)
        return None

    def _worker_died(self, event: WorkerDied) -> Restart | None:
        """Ask for a restart if the budget allows and the worker's batches can be run again
        (a stream's cannot: its position died with it); otherwise place the crash error."""
        if not self.plan.iterable and self.restarts < self.max_restarts:
            return Restart(event)
        self._place_crash(event.worker_id, self._crash_error(event))
        return None

    def restarted(self, event: WorkerDied) -> str:
        """The transport replaced the dead worker: its batches in flight are sent to the new
        one under their old task ids (``assignments``). Returns the warning to give the user.

        Nothing changes before the transport has succeeded, so a restart that fails (or a
        warning raised as an error) never leaves batches assigned to a dead worker."""
        lost = self._dispatcher.requeue(event.worker_id)
        self.restarts += 1
        self.stats.worker_restarts = self.restarts
        self._retries.extend(
            self._assignment(event.worker_id, task_id, indices) for task_id, indices in lost
        )
        return (
            f"DataLoader worker {event.worker_id} ({_who(event)}) exited unexpectedly "
            f"({event.how}); restarting it (restart {self.restarts} of "
            f"max_worker_restarts={self.max_restarts} this epoch) and loading its "
            f"{len(lost)} batch(es) in flight again, dataset indices: "
            f"{[indices for _, indices in lost]}"
        )

    def restart_failed(self, event: WorkerDied, cause: BaseException) -> None:
        """Starting the replacement raised ``cause``: the death stands as a crash."""
        error = self._crash_error(event, f" Starting a new worker failed: {cause!r}.")
        error.__cause__ = cause
        self._place_crash(event.worker_id, error)

    def _place_crash(self, worker_id: int, error: WorkerCrashedError) -> None:
        """The crash takes the place of the dead worker's first lost batch (or of the next
        batch to be handed out, if it held none), so that every batch before it in sampler
        order, other workers' included, comes first; nothing after it is handed out."""
        lost_ids = self._dispatcher.abandon(worker_id)
        place = lost_ids[0] if lost_ids else self._dispatcher.next_task_id
        self._reorder.add(place, _Raise(error, fatal=True))

    def _crash_error(self, event: WorkerDied, why_not_restarted: str = "") -> WorkerCrashedError:
        pending = self._dispatcher.pending(event.worker_id)
        hint = ""
        if event.signal == signal.SIGBUS:
            hint = " A bus error usually means shared memory (/dev/shm) ran out."
        elif event.signal == signal.SIGKILL:
            hint = " SIGKILL often comes from the kernel's out-of-memory killer."
        if why_not_restarted:
            hint += why_not_restarted
        elif self.max_restarts and self.plan.iterable:
            hint += " An IterableDataset's worker is not restarted: its stream's place is lost."
        elif self.max_restarts:
            hint += f" It was not restarted: max_worker_restarts={self.max_restarts} were used."
        return WorkerCrashedError(
            f"{_torch_words(event)}. DataLoader worker {event.worker_id} ({_who(event)}) had "
            f"{len(pending)} batch(es) in flight when it ended ({event.how}); their dataset "
            f"indices: {pending}.{hint}"
        )

    def timeout_error(self, why: str = "") -> LoaderTimeoutError:
        """The error for a wait past ``timeout``: it names the indices still pending, and
        ``why`` the wait may have been long (what the transport knows)."""
        pending = {w: self._dispatcher.pending(w) for w in range(self._dispatcher.num_workers)}
        by_worker = {w: indices for w, indices in pending.items() if indices}
        return LoaderTimeoutError(
            f"DataLoader timed out after {self.plan.timeout} seconds waiting for a batch; "
            f"dataset indices still pending, by worker: {by_worker}" + (f". {why}" if why else "")
        )

    # -- handing out batches --------------------------------------------------------------

    def pop(self) -> tuple[bool, Any]:
        """(True, batch) for the next batch to hand out, (False, None) if it has not arrived.
        A failure is raised at its batch's turn; one that ends the epoch sets ``broken``."""
        while True:
            found, item = self._reorder.pop()
            if not found:
                return False, None
            self.position.ahead = self._reorder.ahead
            if self._sources is not None:
                self._sources.delivered(self._reorder.last)
            if type(item) is _Accounted:
                if not self._account(item):
                    continue
                return True, item.batch
            if type(item) is _Raise:
                self.broken = self.broken or item.fatal
                error, item = item.error, None
                try:
                    raise error
                finally:
                    # No local may hold the error: its traceback holds this frame, and the
                    # frames above hold the iterator, whose workers would then live on in a
                    # reference cycle until the garbage collector happened to run.
                    del error
            return True, item

    def _account(self, item: _Accounted) -> bool:
        """Count a batch's samples and its skipped ones, in sampler order (warns; past the
        budget, TooManySkippedError ends the epoch). False for a batch all skipped: it is
        passed over, but counts as delivered for resuming."""
        assert self._ledger is not None
        tried = len(item.indices) if self.plan.auto_collation else 1
        try:
            self._ledger.account(tried, item.skipped)
        except Exception:
            self.broken = True
            raise
        if item.batch is None:
            self.position.batches_yielded += 1
            return False
        return True

    def set_in_flight(self, batches: int) -> None:
        """Keep ``batches`` loading or waiting from now on (a new prefetch_factor)."""
        self._dispatcher.budget = max(batches, 1)

    def limit_in_flight(self, batches: int) -> None:
        """Keep at most ``batches`` loading or waiting from now on (memory_budget)."""
        self._dispatcher.budget = min(self._dispatcher.budget, batches)

    @property
    def last_task_id(self) -> int:
        """The task whose batch (or error) was popped last."""
        return self._reorder.last

    def delivered(self) -> None:
        """A batch was handed to the consumer."""
        self.position.batches_yielded += 1
        reported = self.length_hint
        yielded = self.position.batches_yielded
        if self.plan.iterable and reported is not None and yielded > reported:
            hint = (
                " For multiprocessing data-loading, this could be caused by not properly "
                "configuring the IterableDataset replica at each worker: each worker must "
                "read its own shard (see get_worker_info())."
                if self.plan.num_workers > 0
                else ""
            )
            warn_at_user(
                f"Length of IterableDataset {self.plan.dataset!r} was reported to be "
                f"{reported} (when accessing len(dataloader)), but {yielded} "
                f"samples have been fetched.{hint}"
            )

    def discard(self) -> None:
        """Drop the batches that arrived but were not handed out (loading stops, or a new
        epoch starts on the same workers)."""
        self._reorder.reset()

    def end(self) -> None:
        """The last batch was handed out."""
        self.position.exhausted = True

    # -- stats ----------------------------------------------------------------------------

    def absorb_stages(self, stages: dict[str, float] | None) -> None:
        """Add a worker's stage clock readings (read = dataset time not marked transform)."""
        if not stages:
            return
        totals = self.stats.stage_s
        transform = stages.get("transform", 0.0)
        totals["read"] += max(stages.get("fetch", 0.0) - transform, 0.0)
        totals["transform"] += transform
        totals["collate"] += stages.get("collate", 0.0)
        totals["transport"] += stages.get("transport", 0.0)
        self.stats.worker_busy_s += stages.get("task", 0.0)

    def _note_cpu(self, worker_id: int, cpu_s: float) -> None:
        """The sum over workers of their CPU time this epoch, kept up by the change in this
        worker's reading (summing every worker's per batch cost O(workers))."""
        worker_cpu = self._worker_cpu
        before = worker_cpu.get(worker_id)
        if before is None:
            before = self._cpu_at_start.get(worker_id, 0.0)
        worker_cpu[worker_id] = cpu_s
        self.stats.worker_cpu_s += cpu_s - before

    def count_batch(self, waited_s: float) -> None:
        """The consumer waited ``waited_s`` for a batch."""
        self.stats.batches += 1
        self.stats.stage_s["wait"] += waited_s
        if self.stats.first_batch_s is None:
            self.stats.first_batch_s = time.perf_counter() - self._started_at

    def stats_snapshot(self) -> stats.LoaderStats:
        snapshot = stats.LoaderStats(**vars(self.stats))
        snapshot.stage_s = dict(self.stats.stage_s)
        snapshot.skipped = list(self.stats.skipped)
        snapshot.elapsed_s = time.perf_counter() - self._started_at
        snapshot.main_cpu_s = time.process_time() - self._main_cpu_at_start
        if snapshot.worker_method == "thread":  # the process's CPU time includes its workers'
            snapshot.main_cpu_s = max(snapshot.main_cpu_s - snapshot.worker_cpu_s, 0.0)
        snapshot.in_flight = self.in_flight
        if self._sources is not None:
            snapshot.sources = self._sources.counts()
        return snapshot
