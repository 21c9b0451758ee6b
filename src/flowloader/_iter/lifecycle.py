"""WorkerGroup: starts a loader's worker processes and the main process's ends of their
pipes; replaces a dead one; stops them within one shared deadline and leaves nothing behind:
no child process, no /dev/shm segment file, no file descriptor. (What this process maps of
their segments is the process transport's SegmentLedger.)
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import pickle
import signal
import time
from multiprocessing.reduction import ForkingPickler
from typing import Any

from .._ipc import messages, shm
from .._ipc.framing import MessageReader, write_message
from .._ipc.poller import Poller
from .._plan import LoadPlan
from .._worker.process import run_worker
from .transport import STOP_GRACE_S, worker_config

# SIGTERM -> exit, for all workers together; then SIGKILL.
TERMINATE_GRACE_S = 1.0
# Refuse to start when /dev/shm has less than this free.
MIN_FREE_SHM_BYTES = 16 << 20

_group_tokens = itertools.count()


def default_context(dataset: Any = None) -> multiprocessing.context.BaseContext:
    """fork where the platform has it (as PyTorch), else the platform's default. A dataset
    that says ``fork_safe = False`` (it runs a library whose threads a fork would leave
    broken, as Lance's runtime) gets forkserver: its workers start from a clean process and
    receive the dataset pickled."""
    methods = multiprocessing.get_all_start_methods()
    if not getattr(dataset, "fork_safe", True) and "forkserver" in methods:
        return multiprocessing.get_context("forkserver")
    if "fork" in methods:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            return f"killed by signal {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


class WorkerHandle:
    """A worker process as torch's iterator lists them (``iterator._workers``): it still
    answers ``is_alive``, ``join`` and ``exitcode`` after the loader reaped and closed it."""

    def __init__(self, process: Any, group: WorkerGroup) -> None:
        self._process, self._group = process, group

    def _reaped(self) -> bool:
        return id(self._process) in self._group.reaped

    @property
    def pid(self) -> int | None:
        if self._reaped():
            return self._group.reaped[id(self._process)][0]
        return self._process.pid

    def is_alive(self) -> bool:
        return not self._reaped() and bool(self._process.is_alive())

    def join(self, timeout: float | None = None) -> None:
        if not self._reaped():
            self._process.join(timeout)

    def terminate(self) -> None:
        if not self._reaped():
            self._process.terminate()

    @property
    def exitcode(self) -> int | None:
        if self._reaped():
            return self._group.reaped[id(self._process)][1]
        return self._process.exitcode


class WorkerGroup:
    """The worker processes of one iterator and the main process's ends of their pipes."""

    def __init__(self, plan: LoadPlan, base_seed: int) -> None:
        shm.check_free_space(MIN_FREE_SHM_BYTES)
        context = plan.multiprocessing_context or default_context(plan.dataset)
        self.prefix = f"{shm.process_prefix()}{next(_group_tokens)}_"
        self.processes: list[Any] = [None] * plan.num_workers
        # id(process) -> (pid, exit code) of the processes reaped and closed at shutdown.
        self.reaped: dict[int, tuple[int | None, int | None]] = {}
        self.task_conns: list[Any] = [None] * plan.num_workers
        self.result_conns: list[Any] = [None] * plan.num_workers
        self._starts = [0] * plan.num_workers  # processes started per worker id
        self._context, self._plan, self._base_seed = context, plan, base_seed
        self._worker_of: dict[Any, int] = {}
        self._poller = Poller([])
        self._pipe_pollers: list[Any] = [None] * plan.num_workers
        self._readers: list[Any] = [None] * plan.num_workers
        # worker id -> why its reply could not be read (the worker was stopped for it)
        self._unreadable: dict[int, Exception] = {}
        self.closed = False
        try:
            for worker_id in range(plan.num_workers):
                self._start_worker(worker_id)
        except BaseException:
            self.shutdown()
            raise

    def live_pids(self) -> list[int]:
        """The process ids of the workers running now (for measuring their memory)."""
        pids = []
        for process in self.processes:
            if process is not None:
                with contextlib.suppress(ValueError):  # closed: it was stopped
                    if process.is_alive() and process.pid is not None:
                        pids.append(process.pid)
        return pids

    def worker_prefix(self, worker_id: int) -> str:
        """The segment names of the current process of ``worker_id`` start with this."""
        return f"{self.prefix}w{worker_id}s{self._starts[worker_id]}_"

    def restart(self, worker_id: int) -> None:
        """Replace a dead worker by a new process with the same id and seed. The dead one is
        reaped and its pipes closed now; its segment files that nobody mapped are removed."""
        old = self.processes[worker_id]
        old.join(TERMINATE_GRACE_S)  # its pipe closed: it is gone or about to be
        if old.is_alive():
            old.kill()
            old.join()
        self._forget_handles(worker_id)
        old.close()
        self.processes[worker_id] = None  # until the new one starts (which may fail)
        for conns in (self.task_conns, self.result_conns):
            conns[worker_id].close()
            conns[worker_id] = None
        shm.unlink_all(self.worker_prefix(worker_id))
        self._starts[worker_id] += 1
        self._start_worker(worker_id)

    def _forget_handles(self, worker_id: int) -> None:
        """Stop watching the worker's current process and pipe (both may be gone already)."""
        for handle in (self.result_conns[worker_id], self.processes[worker_id].sentinel):
            self._poller.forget(handle)
            self._worker_of.pop(handle if isinstance(handle, int) else id(handle), None)

    def _start_worker(self, worker_id: int) -> None:
        context, plan, base_seed = self._context, self._plan, self._base_seed
        task_reader, task_writer = context.Pipe(duplex=False)
        result_reader, result_writer = context.Pipe(duplex=False)
        config = worker_config(
            plan,
            worker_id,
            base_seed,
            segment_prefix=self.worker_prefix(worker_id),
            main_pid=os.getpid(),
        )
        process = context.Process(  # type: ignore[attr-defined]
            target=run_worker,
            args=(config, task_reader, result_writer),
            name=f"flowloader-worker-{worker_id}",
            daemon=True,
        )
        self.task_conns[worker_id] = task_writer
        self.result_conns[worker_id] = result_reader
        try:
            process.start()
        finally:
            # The child has its own copies now; keeping ours would hide its death from recv.
            task_reader.close()
            result_writer.close()
        self.processes[worker_id] = process
        self._worker_of[id(result_reader)] = self._worker_of[process.sentinel] = worker_id
        self._poller.watch(result_reader)
        self._poller.watch(process.sentinel)
        self._pipe_pollers[worker_id] = Poller([result_reader])
        self._readers[worker_id] = MessageReader(result_reader.fileno())

    def send(self, worker_id: int, message: Any) -> None:
        """Send to a worker; a dead worker is reported by :meth:`receive`, not here.

        Pickled by the plain pickler: ``Connection.send``'s ForkingPickler copies its
        dispatch table for every message, a cost paid once per batch. What only the
        ForkingPickler can pickle (a sampler's exotic indices) still goes through it.
        """
        conn = self.task_conns[worker_id]
        if conn is None:  # its replacement failed to start: the epoch ends with a crash
            return
        try:
            data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
        except Exception:
            data = bytes(ForkingPickler.dumps(message))
        with contextlib.suppress(OSError):  # BrokenPipeError, ConnectionResetError: it is gone
            write_message(conn.fileno(), data)

    def receive(self, timeout: float | None) -> tuple[list[Any], list[int]]:
        """Wait up to ``timeout`` for messages; returns (messages, ids of workers that died).

        Waits on the result pipes and the process sentinels together, so a death wakes us
        as fast as a message does.
        """
        received: list[Any] = []
        died: set[int] = set()
        for handle in self._poller.ready(timeout):
            if isinstance(handle, int):
                died.add(self._worker_of[handle])
            elif not self._drain(self._worker_of[id(handle)], received, known_ready=True):
                died.add(self._worker_of[id(handle)])
        return received, self._settle(sorted(died), received)

    def _settle(self, dead: list[int], received: list[Any]) -> list[int]:
        """Read what dead workers sent before dying (still valid: their batches' segments stay
        until mapped), reap them, and stop watching them. Each death is reported once."""
        for worker_id in dead:
            self._drain(worker_id, received)
            self.processes[worker_id].join(0.5)  # an EOF can come just before the exit
            self._forget_handles(worker_id)
        return dead

    def _drain(self, worker_id: int, into: list[Any], known_ready: bool = False) -> bool:
        """Read the pending messages of a worker; False once its pipe is closed."""
        reader, poller = self._readers[worker_id], self._pipe_pollers[worker_id]
        frames: list[bytes] = []
        try:
            if known_ready:
                is_open = reader.read_into(frames)
            else:
                is_open = True
                while is_open and poller.any_ready():
                    is_open = reader.read_into(frames)
        except OSError:
            is_open = False
        for frame in frames:
            try:
                into.append(pickle.loads(frame))
            except Exception as error:  # a reply this process cannot unpickle: its task is lost
                self._unreadable[worker_id] = error
                self.processes[worker_id].kill()  # so its batches fail (or go to a new worker)
                return False
        return is_open

    def exit_description(self, worker_id: int) -> tuple[int | None, str, int | None]:
        """(pid, how it ended, the signal that killed it or None)."""
        process = self.processes[worker_id]
        unreadable = self._unreadable.pop(worker_id, None)
        if unreadable is not None:
            return (
                process.pid,
                f"stopped: it sent a reply that could not be read: {unreadable!r}",
                None,
            )
        exitcode = process.exitcode
        killed_by = -exitcode if exitcode is not None and exitcode < 0 else None
        return process.pid, describe_exit(exitcode), killed_by

    def shutdown(self, stop_grace_s: float = STOP_GRACE_S) -> None:
        """Stop every worker (Stop -> SIGTERM -> SIGKILL under shared deadlines), close the
        pipes and mappings, and remove this group's segments. Safe to call more than once.

        ``stop_grace_s=0`` skips the polite stage, for workers known to be hung or broken.
        """
        if self.closed:
            return
        self.closed = True
        processes = [p for p in self.processes if p is not None]
        for worker_id, process in enumerate(self.processes):
            if process is not None:
                self.send(worker_id, messages.Stop())
        _join_all(processes, stop_grace_s)
        for process in processes:
            if process.is_alive():
                process.terminate()
        _join_all(processes, TERMINATE_GRACE_S)
        for process in processes:
            if process.is_alive():
                process.kill()
                process.join()
            self.reaped[id(process)] = (process.pid, process.exitcode)
            process.close()
        for conn in [*self.task_conns, *self.result_conns]:
            if conn is not None:
                conn.close()
        shm.unlink_all(self.prefix)


def _join_all(processes: list[Any], grace_s: float) -> None:
    deadline = time.monotonic() + grace_s
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
