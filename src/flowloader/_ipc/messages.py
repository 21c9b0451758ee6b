"""The protocol between the main process and the workers: small, named, picklable messages.

Main -> worker (on the worker's task pipe): Task, Release, Resume, Stop.
Worker -> main (on the worker's result pipe): Ready, Result, Failure, StreamEnd.
Array payloads never travel here; a Result names the shared-memory segment that holds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Task:
    """Load the batch at ``indices`` (an index, a list of them, or a stream placeholder)."""

    epoch: int
    task_id: int
    indices: Any


@dataclass(frozen=True)
class Release:
    """The consumer dropped the batches held in these segments; they may be reused."""

    segment_names: tuple[str, ...]


@dataclass(frozen=True)
class Resume:
    """A new epoch starts on persistent workers: restart the dataset stream."""

    epoch: int


@dataclass(frozen=True)
class Stop:
    """Exit the worker loop, release everything and exit."""


@dataclass(frozen=True)
class Ready:
    """The worker finished its set-up (seeding, worker_init_fn) and waits for tasks."""

    worker_id: int
    pid: int


@dataclass(frozen=True)
class Result:
    """A loaded batch: its structure travels here, its arrays in a shared-memory segment."""

    epoch: int
    task_id: int
    worker_id: int
    batch: Any  # an EncodedBatch
    retired_segments: tuple[str, ...] = ()


@dataclass(frozen=True)
class Failure:
    """Loading the batch raised; ``error`` carries the exception and the worker's traceback."""

    epoch: int
    task_id: int
    worker_id: int
    error: Any  # a RemoteError


@dataclass(frozen=True)
class StreamEnd:
    """The worker's IterableDataset stream ended before this task could be filled."""

    epoch: int
    task_id: int
    worker_id: int
