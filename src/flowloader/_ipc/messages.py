"""The protocol between the main process and the workers: small, named, picklable messages.

Main -> worker (on the worker's task pipe): Task, Release, Retire, Resume, Stop.
Worker -> main (on the worker's result pipe): Result, Empty, Failure, StreamEnd.
Array payloads never travel here; a Result names the shared-memory segment that holds them.
The two messages sent once per batch, Task and Result, cross the pipes as plain tuples of their
fields (``on_wire``; a Task is rebuilt by ``Task(*fields)``, a Result read where it lands):
pickling a class writes its name and unpickling looks it up and runs its Python constructor,
which together cost several times what the tuple does, once per batch each way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class Wire:
    """Pickles as (class, field values): several times cheaper than a dataclass's default,
    which matters at one message per batch.

    Subclasses are slotted dataclasses, not frozen ones, though they are never changed after
    they are made: unpickling calls the class, and a frozen dataclass costs several times as
    much to construct.
    """

    __slots__ = ()

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        return type(self), self.on_wire()

    def on_wire(self) -> tuple[Any, ...]:
        """The field values, in order."""
        return tuple(map(self.__getattribute__, self.__slots__))


@dataclass(slots=True)
class Task(Wire):
    """Load the batch at ``indices`` (an index, a list of them, or a stream placeholder).

    ``releases`` piggybacks segments the consumer dropped (saves a message per batch).
    """

    generation: int  # which pass of the iterator over its workers (stale results are dropped)
    task_id: int
    indices: Any
    releases: tuple[str, ...] = ()
    epoch_seed: int | None = None  # every sample's generator derives from it (SampleSeeds)
    epoch: int = 0  # the loader's epoch: the worker hands it to its dataset copy
    batch: int = 0  # the batch's number in the epoch: seeds batching.batch_rng for collate_fn


@dataclass(slots=True)
class Release(Wire):
    """The consumer dropped the batches held in these segments; they may be reused."""

    segment_names: tuple[str, ...]


@dataclass(slots=True)
class Retire(Wire):
    """Between epochs the main process unmapped these segments (beyond what the pipeline
    needs): retire them, now if free, else when released; never reuse them."""

    segment_names: tuple[str, ...]


@dataclass(slots=True)
class Resume(Wire):
    """A new epoch starts on persistent workers: restart the dataset stream."""


@dataclass(slots=True)
class Stop(Wire):
    """Exit the worker loop, release everything and exit."""


@dataclass(slots=True)
class Result(Wire):
    """A loaded batch: its structure travels here, its arrays in a shared-memory segment."""

    generation: int
    task_id: int
    worker_id: int
    batch: Any  # from a worker process: an EncodedBatch's on_wire() tuple
    retired_segments: tuple[str, ...] = ()
    stages: dict[str, float] | None = None  # this worker's stage seconds since its last Result
    cpu_s: float = 0.0  # the worker's CPU time so far
    skipped: tuple[Any, ...] = ()  # SkippedSamples dropped from this batch (skip_errors)
    # For the trace (flowloader.timeline): (task start, sent), then, where the batch was
    # fetched and collated, (fetch start, fetched, collated, transform seconds).
    marks: tuple[float, ...] | None = None


@dataclass(slots=True)
class Empty(Wire):
    """Every sample of the batch was skipped (``skip_errors``): nothing to hand out."""

    generation: int
    task_id: int
    worker_id: int
    skipped: tuple[Any, ...]


@dataclass(slots=True)
class Failure(Wire):
    """Loading the batch raised; ``error`` carries the exception and the worker's traceback."""

    generation: int
    task_id: int
    worker_id: int
    error: Any  # a RemoteError


@dataclass(slots=True)
class StreamEnd(Wire):
    """The worker's IterableDataset stream ended before this task could be filled."""

    generation: int
    task_id: int
    worker_id: int
