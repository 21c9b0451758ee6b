"""The worker process: one top-level entry point taking one frozen configuration.

A worker process seeds its global generators, then runs the worker body (body.py) over its
task pipe: each batch is collated straight into a shared-memory segment and answered on the
result pipe by a small Result that names it.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

from .. import _seed, stats
from .._compat import torch as _torch
from .._ipc import messages
from .._ipc.batch_codec import encode
from .._ipc.poller import Poller
from .._ipc.segment_pool import SegmentPool
from .allocator import keep_large_allocations
from .body import WorkerBody, WorkerConfig
from .info import WorkerInfo, set_worker_info
from .watchdog import ParentWatchdog

__all__ = ["WorkerConfig", "run_worker"]

# How often an idle worker checks that the main process is still there.
PARENT_CHECK_INTERVAL_S = 0.5


class ProcessWorker(WorkerBody):
    """A worker process's body: batches go through its pool of shared-memory segments."""

    def __init__(self, config: WorkerConfig, results: Any) -> None:
        super().__init__(config, results.send)
        self.pool = SegmentPool(config.segment_prefix)
        self.batch_bytes_hint = 0
        # Before seeding and worker_init_fn, as in torch's workers (worker_init_fn may raise it).
        _torch.when_imported(_torch.limit_threads)
        seed = _seed.seed_worker(config.base_seed, config.worker_id)
        set_worker_info(WorkerInfo(config.worker_id, config.num_workers, seed, config.dataset))
        self.start()

    def _reserve(self) -> Any:
        return self.pool.arena(self.batch_bytes_hint)

    def _unreserve(self, arena: Any) -> None:
        if arena is not None:
            self.pool.give_back(arena.segment)

    def _send_batch(self, task: messages.Task, batch: Any, arena: Any) -> None:
        started = time.perf_counter()
        try:
            encoded = encode(batch, self.pool, arena)
        except Exception as error:
            self._unreserve(arena)
            self.send(self.failure(task, error, "while moving the batch to shared memory"))
            return
        self.batch_bytes_hint = max(self.batch_bytes_hint, encoded.used)
        if stats.enabled:
            self.clock.transport += time.perf_counter() - started
        result = self.result(task, encoded.on_wire(), time.process_time(), self.pool.pop_retired())
        try:
            self.send(result)
        except Exception as error:  # an unpicklable non-array leaf, for instance
            if encoded.segment_name is not None:
                self.pool.release((encoded.segment_name,))
            self.send(self.failure(task, error, "while sending the batch"))


def run_worker(config: WorkerConfig, tasks: Any, results: Any) -> None:
    """Entry point of a worker process; returns when told to stop or the main process is gone."""
    # Ctrl-C reaches the whole process group; the main process handles it and stops us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    keep_large_allocations()
    watchdog = ParentWatchdog(config.main_pid)
    results = _ResultPipe(results)
    worker = ProcessWorker(config, results)
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
            if type(message) is tuple:  # a Task's fields (messages.Task.on_wire)
                message = messages.Task(*message)
            if isinstance(message, messages.Task):
                worker.pool.release(message.releases)
                worker.run_task(message)
            elif isinstance(message, messages.Release):
                worker.pool.release(message.segment_names)
            elif isinstance(message, messages.Retire):
                worker.pool.retire(message.segment_names)
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
        """Send ``message``; a Result goes as the tuple of its fields (messages.Wire)."""
        if type(message) is messages.Result:
            message = message.on_wire()
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
