"""What a transport tells an Epoch, and what an Epoch asks of a transport.

A transport (in-process, worker processes, worker threads) turns whatever it receives into
these events; the Epoch decides what each one means for the order, the position and the
account of the epoch. None of them carries a pipe, a segment or a thread. They are values,
never changed after they are made; they are not frozen dataclasses only because one is made
per batch, and a frozen dataclass costs several times as much to construct.

Workers answer tasks with the messages of ``_ipc.messages`` (what crosses a pipe or a
queue); each reply becomes one event here (``from_reply``), which carries the batch as the
transport opened it (views of shared memory, or the object itself):

    messages.Result -> Loaded    messages.Failure -> Failed (the error rebuilt)
    messages.Empty  -> Emptied   messages.StreamEnd -> StreamEnded

WorkerDied has no message: the transport sees the death (a process's sentinel, a thread's
last word).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._ipc import messages


@dataclass(slots=True)
class Assignment:
    """Load the batch at ``indices`` (an index, a list of them, or a stream placeholder) on
    worker ``worker_id``; ``epoch_seed`` seeds every sample's generator (SampleSeeds),
    ``epoch`` is the loader's epoch, which the worker hands its dataset copy, and ``batch``
    the batch's number in the epoch (with ``epoch_seed``, the seed of ``batch_rng()``)."""

    worker_id: int
    task_id: int
    indices: Any
    epoch_seed: int
    epoch: int = 0
    batch: int = 0  # its number in the epoch's order (Epoch.batch_number): batch_rng's seed

    def task(self, generation: int) -> messages.Task:
        """The Task a thread worker or a Ray actor is handed for it (process workers' tasks
        travel as tuples, with the releases that ride along)."""
        return messages.Task(
            generation,
            self.task_id,
            self.indices,
            epoch_seed=self.epoch_seed,
            epoch=self.epoch,
            batch=self.batch,
        )


@dataclass(slots=True)
class Loaded:
    """A batch is ready. ``skipped``: the samples skip_errors dropped from it; ``stages``: the
    worker's stage seconds since its last report; ``cpu_s``: its CPU time so far."""

    task_id: int
    worker_id: int
    batch: Any
    skipped: tuple[Any, ...] = ()
    stages: dict[str, float] | None = None
    cpu_s: float | None = None
    marks: tuple[float, ...] | None = None  # for the trace (messages.Result.marks)


@dataclass(slots=True)
class Emptied:
    """Every sample of the batch was skipped (skip_errors): nothing to hand out."""

    task_id: int
    worker_id: int
    skipped: tuple[Any, ...]


@dataclass(slots=True)
class Failed:
    """Loading the batch raised ``error``; it is raised in the batch's place. A ``fatal``
    failure (the batch arrived but cannot be opened) also ends the epoch."""

    task_id: int
    worker_id: int
    error: BaseException
    fatal: bool = False


@dataclass(slots=True)
class StreamEnded:
    """The worker's IterableDataset stream ended before this task could be filled."""

    task_id: int
    worker_id: int


@dataclass(slots=True)
class WorkerDied:
    """A worker is gone (every message it sent before dying came first). ``how`` says how it
    ended ("killed by signal SIGKILL", "exit code 1", ...); ``signal``: the signal number
    that killed it, if one did."""

    worker_id: int
    pid: int | None
    how: str
    signal: int | None = None
    # How errors name the worker where a pid does not ("Ray actor 1f3c..."); None: a thread.
    who: str | None = None


Event = Loaded | Emptied | Failed | StreamEnded | WorkerDied


def from_reply(message: Any, batch: Any = None) -> Event:
    """The event a worker's reply to a task stands for (``_ipc.messages``; a Result's batch,
    as the transport opened it, is ``batch``)."""
    match message:
        case messages.Result():
            return Loaded(
                message.task_id,
                message.worker_id,
                batch,
                message.skipped,
                message.stages,
                message.cpu_s,
                message.marks,
            )
        case messages.Failure():
            return Failed(message.task_id, message.worker_id, message.error.rebuild())
        case messages.Empty():
            return Emptied(message.task_id, message.worker_id, message.skipped)
        case messages.StreamEnd():
            return StreamEnded(message.task_id, message.worker_id)
    raise TypeError(f"not a reply to a task: {message!r}")


@dataclass(slots=True)
class Restart:
    """The Epoch's answer to a death it can absorb: start the dead worker again. Once that
    succeeded, ``Epoch.restarted`` sends it the batches its predecessor held; if it failed,
    ``Epoch.restart_failed`` makes the death a crash."""

    death: WorkerDied

    @property
    def worker_id(self) -> int:
        return self.death.worker_id
