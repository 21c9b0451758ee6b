"""Carry an exception from a worker to the main process and re-raise it there.

The main process re-raises the original type with a message naming the worker, the dataset
indices of the failing batch and the worker's traceback. A type that cannot be rebuilt from a
message becomes :class:`flowloader.errors.WorkerError` with the same text.
"""

from __future__ import annotations

import pickle
import traceback
from dataclasses import dataclass
from typing import Any

from ..errors import SharedMemoryError, WorkerError, failed_sample
from .batch_codec import held_batches


class _KeyErrorMessage(str):
    """KeyError shows the repr of its argument; this keeps a multi-line message readable."""

    def __repr__(self) -> str:
        return str(self)


@dataclass(frozen=True)
class RemoteError:
    type_name: str
    type_pickle: bytes | None  # the exception class, when it can be pickled by reference
    traceback_text: str
    worker_id: int
    pid: int
    indices: Any
    where: str
    summary: str = ""  # the error's own first line, which names the sample and file where known
    sample: str | None = None  # which sample of the batch raised it, where the loader knows

    @classmethod
    def capture(
        cls, error: BaseException, *, worker_id: int, pid: int, indices: Any, where: str
    ) -> RemoteError:
        """Record ``error`` (with its traceback) raised while loading ``indices``."""
        try:
            type_pickle: bytes | None = pickle.dumps(type(error))
        except Exception:
            type_pickle = None
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        return cls(
            type_name=type(error).__qualname__,
            type_pickle=type_pickle,
            traceback_text=text,
            worker_id=worker_id,
            pid=pid,
            indices=indices,
            where=where,
            summary=_first_line(error),
            sample=failed_sample(error),
        )

    def message(self) -> str:
        """The first line says what failed (the error's own first line: the sample and its
        file, where the dataset names them) before the batch's indices and the traceback."""
        summary = f": {self.summary}" if self.summary else ""
        sample = f"; raised by {self.sample}" if self.sample else ""
        return (
            f"Caught {self.type_name} in DataLoader worker {self.worker_id} (pid {self.pid}) "
            f"{self.where}{summary}{sample}; the batch's dataset indices "
            f"{_describe_indices(self.indices)}.\n"
            f"Original {self.traceback_text}"
        )

    def rebuild(self) -> BaseException:
        """The exception to raise in the main process."""
        message = self.message()
        exc_type = _load_type(self.type_pickle)
        if exc_type is SharedMemoryError:
            first, _, rest = message.partition("\n")
            message = f"{first} {_held_batches_note()}\n{rest}"
        if exc_type is None:
            return WorkerError(message)
        if exc_type is KeyError:
            return KeyError(_KeyErrorMessage(message))
        try:
            return exc_type(message)
        except Exception:
            return WorkerError(f"{message}\n(the {self.type_name} could not be re-created here)")


def _load_type(type_pickle: bytes | None) -> type | None:
    if type_pickle is None:
        return None
    try:
        loaded = pickle.loads(type_pickle)
    except Exception:
        return None
    return loaded if isinstance(loaded, type) and issubclass(loaded, BaseException) else None


def _first_line(error: BaseException, limit: int = 500) -> str:
    try:
        lines = str(error).strip().splitlines()
    except Exception:
        return ""
    first = lines[0] if lines else ""
    return first if len(first) <= limit else first[: limit - 3] + "..."


def _held_batches_note() -> str:
    """What this program holds of the batches it was handed: each array kept (not a copy)
    keeps its batch's whole segment."""
    held = held_batches()
    return (
        f"This program still holds {held} batch(es) from flowloader's workers: an array kept "
        "from a batch (not small ones, which are copies) keeps that batch's whole shared "
        "memory; keep a copy of what you keep (x.copy()), or drop it, to give it back."
    )


# A batch's indices named in a worker's error, at most (a batch of 256 made 7 KB messages).
LISTED_INDICES = 8


def _describe_indices(indices: Any) -> str:
    if isinstance(indices, list) and indices and all(i is None for i in indices):
        return f"(a batch of {len(indices)} from an IterableDataset stream)"
    if indices is None:
        return "(a sample from an IterableDataset stream)"
    if isinstance(indices, list) and len(indices) > LISTED_INDICES:
        shown = ", ".join(map(repr, indices[:LISTED_INDICES]))
        return f"[{shown}, ... ({len(indices)} in all)]"
    return repr(indices)
