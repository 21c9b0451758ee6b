"""The worker process: one top-level entry point taking one frozen configuration.

A worker seeds itself, runs ``worker_init_fn``, then serves its task pipe: each Task becomes a
batch collated straight into a shared-memory segment, answered on the result pipe by a small
Result (or a Failure carrying the exception and traceback, or a StreamEnd).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import _seed, stats
from .._compat import torch as _torch
from .._fetch import EmptyBatch, make_fetcher
from .._ipc import messages
from .._ipc.batch_codec import encode
from .._ipc.poller import Poller
from .._ipc.remote_error import RemoteError
from .._ipc.segment_pool import SegmentPool
from ..collate import batch_allocator
from ..randomness import SampleSeeds
from .allocator import keep_large_allocations
from .info import WorkerInfo, set_worker_info
from .watchdog import ParentWatchdog

# How often an idle worker checks that the main process is still there.
PARENT_CHECK_INTERVAL_S = 0.5
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
    segment_prefix: str
    main_pid: int
    skip_errors: tuple[type[Exception], ...] = ()


class _Worker:
    """The state of one worker process between tasks."""

    def __init__(self, config: WorkerConfig, results: Any) -> None:
        self.config = config
        self.results = results
        self.pid = os.getpid()
        self.pool = SegmentPool(config.segment_prefix)
        self.clock = stats.StageClock()
        stats.set_clock(self.clock)
        self.batch_bytes_hint = 0
        self.init_error: BaseException | None = None
        self.stream_error: BaseException | None = None
        self.fetcher: Any = None
        # Before seeding and worker_init_fn, as in torch's workers (worker_init_fn may raise it).
        _torch.when_imported(_torch.limit_threads)
        seed = _seed.seed_worker(config.base_seed, config.worker_id)
        set_worker_info(WorkerInfo(config.worker_id, config.num_workers, seed, config.dataset))
        try:
            if config.worker_init_fn is not None:
                config.worker_init_fn(config.worker_id)
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
        started = time.perf_counter()
        self._run_task(task)
        if stats.enabled:
            self.clock.task += time.perf_counter() - started

    def _run_task(self, task: messages.Task) -> None:
        if self.init_error is not None:
            self.results.send(self.failure(task, self.init_error, "in worker_init_fn"))
            return
        if self.stream_error is not None:
            self.results.send(
                self.failure(task, self.stream_error, "starting the dataset's iterator")
            )
            return
        try:
            arena = self.pool.arena(self.batch_bytes_hint)
        except Exception as error:  # SharedMemoryError when /dev/shm is full
            self.results.send(self.failure(task, error, "while reserving shared memory"))
            return
        token = batch_allocator.set(arena.allocate if arena is not None else None)
        reply: Any = None  # instead of a batch (a batch itself may be None, batch_size=None)
        worker_id = self.config.worker_id
        try:
            seeds = None if task.epoch_seed is None else SampleSeeds(task.epoch_seed)
            batch = self.fetcher.fetch(task.indices, seeds)
        except StopIteration:
            reply = messages.StreamEnd(task.generation, task.task_id, worker_id)
        except EmptyBatch:
            skipped = tuple(self.fetcher.skipped)
            reply = messages.Empty(task.generation, task.task_id, worker_id, skipped)
        except Exception as error:
            reply = self.failure(task, error, "while loading")
        finally:
            batch_allocator.reset(token)
        if reply is not None:
            if arena is not None:
                self.pool.give_back(arena.segment)
            self.results.send(reply)
            return
        self.send_batch(task, batch, arena)

    def _stage_report(self) -> dict[str, float] | None:
        if not stats.enabled or self.clock.task < STATS_REPORT_S:
            return None
        return self.clock.take()

    def send_batch(self, task: messages.Task, batch: Any, arena: Any) -> None:
        started = time.perf_counter()
        try:
            encoded = encode(batch, self.pool, arena)
        except Exception as error:
            if arena is not None:
                self.pool.give_back(arena.segment)
            self.results.send(self.failure(task, error, "while moving the batch to shared memory"))
            return
        self.batch_bytes_hint = max(self.batch_bytes_hint, encoded.used)
        if stats.enabled:
            self.clock.transport += time.perf_counter() - started
        result = messages.Result(
            task.generation,
            task.task_id,
            self.config.worker_id,
            encoded,
            self.pool.pop_retired(),
            self._stage_report(),
            time.process_time(),
            tuple(self.fetcher.skipped),
        )
        try:
            self.results.send(result)
        except Exception as error:  # an unpicklable non-array leaf, for instance
            if encoded.segment_name is not None:
                self.pool.release((encoded.segment_name,))
            self.results.send(self.failure(task, error, "while sending the batch"))


def run_worker(config: WorkerConfig, tasks: Any, results: Any) -> None:
    """Entry point of a worker process; returns when told to stop or the main process is gone."""
    # Ctrl-C reaches the whole process group; the main process handles it and stops us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    keep_large_allocations()
    watchdog = ParentWatchdog(config.main_pid)
    results = _ResultPipe(results)
    worker = _Worker(config, results)
    # SIGTERM (the main process's shutdown, or a scheduler's to the whole group) cleans up
    # before the process goes, instead of killing it where it stands.
    results.on_terminate = lambda: _terminate(worker.pool, watchdog)
    signal.signal(signal.SIGTERM, results.on_sigterm)
    incoming = Poller([tasks])
    main_gone = stopped = False
    try:
        while True:
            if not incoming.ready(PARENT_CHECK_INTERVAL_S):
                if not watchdog.parent_alive():
                    main_gone = True
                    return
                continue
            message = tasks.recv()
            if isinstance(message, messages.Task):
                worker.pool.release(message.releases)
                worker.run_task(message)
            elif isinstance(message, messages.Release):
                worker.pool.release(message.segment_names)
            elif isinstance(message, messages.Resume):
                worker.restart_stream()
            elif isinstance(message, messages.Stop):
                stopped = True
                return
    except (EOFError, BrokenPipeError, ConnectionResetError):
        main_gone = True  # the main process closed our pipes: it is gone or shutting down
    finally:
        # Leaving any other way (sys.exit, an exception that is not an Exception...): the
        # main process maps what is in flight, unless it is gone too.
        worker.pool.close(main_gone=main_gone or not (stopped or watchdog.parent_alive()))


def _terminate(pool: SegmentPool, watchdog: ParentWatchdog) -> None:
    """On SIGTERM: unlink what nobody will map (everything, if the main process is going
    too: a scheduler signals the whole process group), then exit at once. Raising SystemExit
    instead could be swallowed where the signal lands (in a __del__, say)."""
    try:
        pool.close(main_gone=not watchdog.settled_alive())
    finally:
        os._exit(128 + signal.SIGTERM)


class _ResultPipe:
    """The result pipe, sending whole messages only: a SIGTERM that arrives while a message
    is being written takes effect after its last byte (half a message would corrupt the pipe
    for the main process)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._sending = False
        self._terminate_after_send = False
        self.on_terminate: Callable[[], None] = lambda: os._exit(128 + signal.SIGTERM)

    def send(self, message: Any) -> None:
        self._sending = True
        try:
            self._conn.send(message)
        finally:
            self._sending = False
        if self._terminate_after_send:
            self.on_terminate()

    def on_sigterm(self, signum: int, frame: Any) -> None:
        if self._sending:
            self._terminate_after_send = True
        else:
            self.on_terminate()
