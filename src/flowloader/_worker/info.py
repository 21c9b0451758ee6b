"""WorkerInfo and get_worker_info(): what a worker process knows about itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["WorkerInfo", "get_worker_info"]


@dataclass(frozen=True)
class WorkerInfo:
    """Describes the current worker process.

    ``seed`` is the worker's seed (the loader's base seed plus ``id``); ``dataset`` is the
    worker's own copy of the dataset, which an IterableDataset uses to shard its stream.
    """

    id: int
    num_workers: int
    seed: int
    dataset: Any


_current: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """The current worker's :class:`WorkerInfo`, or None in the main process."""
    return _current


def set_worker_info(info: WorkerInfo | None) -> None:
    """Install ``info`` as this process's worker description (called once per worker)."""
    global _current
    _current = info
