"""WorkerInfo and get_worker_info(): what a worker (process, thread or Ray actor) knows about
itself."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["WorkerInfo", "get_worker_info"]


@dataclass(frozen=True)
class WorkerInfo:
    """Describes the current worker (a process, or a thread with ``worker_method="thread"``).

    ``seed`` is the worker's seed (the loader's base seed plus ``id``); ``dataset`` is the
    worker's own copy of the dataset, which an IterableDataset uses to shard its stream (a
    thread worker's is a shallow copy: its attributes are its own, its arrays shared).
    ``thread_id`` is the worker thread's ``threading.get_ident()`` (None in a process);
    ``node_id`` the Ray node a Ray actor runs on (``worker_method="ray"``; None otherwise).
    Read-only (a frozen dataclass, as torch's is).
    """

    id: int
    num_workers: int
    seed: int
    dataset: Any
    thread_id: int | None = None
    # "multiprocessing" or "thread", as torch's WorkerInfo says; "ray" for Ray actors.
    worker_method: str = "multiprocessing"
    node_id: str | None = None


_current: WorkerInfo | None = None  # this process's, in a worker process
_thread = threading.local()  # a worker thread's own (worker_method="thread")


def get_worker_info() -> WorkerInfo | None:
    """The current worker's :class:`WorkerInfo` (a worker thread's own, with thread
    workers), or None in the main process."""
    return getattr(_thread, "info", None) or _current


def set_worker_info(info: WorkerInfo | None) -> None:
    """Install ``info`` as this process's worker description (called once per worker)."""
    global _current
    _current = info


def set_thread_worker_info(info: WorkerInfo | None) -> None:
    """Install ``info`` as this thread's worker description (a thread worker, at start)."""
    _thread.info = info
