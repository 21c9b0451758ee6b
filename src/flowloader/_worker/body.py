"""The worker body: what every worker runs, in a process or in a thread.

A worker sets up once (its WorkerInfo, ``worker_init_fn``, the dataset's stream) and then
answers each Task with exactly one message: a Result, an Empty, a Failure carrying the
exception and traceback, or a StreamEnd. How a batch travels (shared memory for processes,
as it is for threads) is its transport's business: the two subclasses' ``_reserve`` and
``_send_batch``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import stats
from .._fetch import EmptyBatch, make_fetcher, stop_in_map_style
from .._ipc import messages
from .._ipc.remote_error import RemoteError
from ..order import hand_epoch
from ..randomness import SampleSeeds

# Stage readings ride on a Result once they cover this much work (not on every cheap batch).
STATS_REPORT_S = 0.005


@dataclass(frozen=True)
class WorkerConfig:
    """Everything a worker needs, picklable for spawn/forkserver."""

    worker_id: int
    num_workers: int
    dataset: Any
    iterable: bool
    auto_collation: bool
    collate_fn: Callable[[Any], Any]
    drop_last: bool
    base_seed: int
    worker_init_fn: Callable[[int], None] | None
    skip_errors: tuple[type[Exception], ...] = ()
    # Process workers only: where their segments are named, and whom they outlive not.
    segment_prefix: str = ""
    main_pid: int = 0


class WorkerBody:
    """The state of one worker between tasks. ``send`` delivers a message to the main side;
    the subclass calls :meth:`start` once its own setup (seeding, say) is done."""

    def __init__(self, config: WorkerConfig, send: Callable[[Any], None]) -> None:
        self.config = config
        self.send = send
        self.pid = os.getpid()
        self.clock = stats.StageClock()
        self.init_error: BaseException | None = None
        self.stream_error: BaseException | None = None
        self.fetcher: Any = None
        self.epoch: int | None = None  # the epoch last handed to this worker's dataset
        self.task_started = 0.0

    def start(self) -> None:
        """Run ``worker_init_fn`` (its error fails every task) and start the stream."""
        stats.set_clock(self.clock)
        try:
            if self.config.worker_init_fn is not None:
                self.config.worker_init_fn(self.config.worker_id)
        except Exception as error:
            self.init_error = error
        self.restart_stream()

    def restart_stream(self) -> None:
        """(Re)start fetching; for an IterableDataset this calls ``iter(dataset)`` again."""
        if self.init_error is not None:
            return
        c = self.config
        try:
            self.fetcher = make_fetcher(
                c.dataset,
                c.iterable,
                c.auto_collation,
                c.collate_fn,
                c.drop_last,
                c.skip_errors,
                f"worker {c.worker_id}'s stream",
            )
            self.stream_error = None
        except Exception as error:
            self.stream_error = error

    def failure(self, task: messages.Task, error: BaseException, where: str) -> messages.Failure:
        remote = RemoteError.capture(
            error, worker_id=self.config.worker_id, pid=self.pid, indices=task.indices, where=where
        )
        return messages.Failure(task.generation, task.task_id, self.config.worker_id, remote)

    def run_task(self, task: messages.Task) -> None:
        started = self.task_started = time.perf_counter()
        self._run_task(task)
        if stats.enabled:
            self.clock.task += time.perf_counter() - started

    def _run_task(self, task: messages.Task) -> None:
        if self.init_error is not None:
            self.send(self.failure(task, self.init_error, "in worker_init_fn"))
            return
        if self.stream_error is not None:
            self.send(self.failure(task, self.stream_error, "starting the dataset's iterator"))
            return
        try:
            arena = self._reserve()
        except Exception as error:  # SharedMemoryError when /dev/shm is full
            self.send(self.failure(task, error, "while reserving shared memory"))
            return
        reply: Any = None  # instead of a batch (a batch itself may be None, batch_size=None)
        worker_id = self.config.worker_id
        try:
            if task.epoch != self.epoch:
                self._hand_epoch(task.epoch)
            seeds = None if task.epoch_seed is None else SampleSeeds(task.epoch_seed)
            batch = self._fetch(task, seeds, arena)
        except StopIteration as error:
            if self.config.iterable:
                reply = messages.StreamEnd(task.generation, task.task_id, worker_id)
            else:
                reply = self.failure(task, stop_in_map_style(error), "while loading")
        except EmptyBatch:
            skipped = tuple(self.fetcher.skipped)
            reply = messages.Empty(task.generation, task.task_id, worker_id, skipped)
        except Exception as error:
            reply = self.failure(task, error, "while loading")
        if reply is not None:
            self._unreserve(arena)
            self.send(reply)
            return
        self._send_batch(task, batch, arena)

    def _hand_epoch(self, epoch: int) -> None:
        """This worker's copy of a map-style dataset reads the loader's epoch (a Mixture's
        sources move on, packed rows reshuffle), persistent workers included."""
        if not self.config.iterable:
            hand_epoch(self.config.dataset, epoch)
        self.epoch = epoch

    def _fetch(self, task: messages.Task, seeds: SampleSeeds | None, arena: Any) -> Any:
        """Load and collate the batch, into ``arena`` where one was reserved."""
        allocate = arena.allocate_or_empty if arena is not None else None
        return self.fetcher.fetch(task.indices, seeds, allocate, task.batch)

    def _reserve(self) -> Any:
        """Where the next batch will be collated (None: ordinary memory)."""
        return None

    def _unreserve(self, arena: Any) -> None:
        """The batch reserved for did not come."""

    def _send_batch(self, task: messages.Task, batch: Any, arena: Any) -> None:
        self.send(self.result(task, batch, time.thread_time()))

    def result(
        self, task: messages.Task, batch: Any, cpu_s: float, retired: tuple[str, ...] = ()
    ) -> messages.Result:
        """The Result for ``batch``, with the stage readings once they are worth sending."""
        stages = marks = None
        if stats.enabled:
            clock = self.clock
            marks = (self.task_started, time.perf_counter(), *(clock.marks or ()))
            clock.marks = None
            if clock.task >= STATS_REPORT_S:
                stages = clock.take()
        return messages.Result(
            task.generation,
            task.task_id,
            self.config.worker_id,
            batch,
            retired,
            stages,
            cpu_s,
            tuple(self.fetcher.skipped),
            marks,
        )
