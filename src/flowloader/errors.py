"""Errors the loader raises itself. All are RuntimeError subclasses, as PyTorch's are."""

from __future__ import annotations

import contextlib
from typing import Any

__all__ = [
    "LoaderTimeoutError",
    "MemoryBudgetError",
    "SharedMemoryError",
    "SkippedSampleWarning",
    "TooManySkippedError",
    "WorkerCrashedError",
    "WorkerError",
]


class WorkerError(RuntimeError):
    """An exception raised in a worker whose original type could not be rebuilt here."""


class WorkerCrashedError(RuntimeError):
    """A worker process died (killed by a signal, ``os._exit``, a crash in native code...)."""


class LoaderTimeoutError(RuntimeError):
    """No batch arrived within the DataLoader's ``timeout``."""


class MemoryBudgetError(RuntimeError):
    """The DataLoader's ``memory_budget`` cannot hold one batch and one worker."""


class SharedMemoryError(RuntimeError):
    """Shared memory (``/dev/shm``) is too small for the batches in flight."""


class TooManySkippedError(RuntimeError):
    """More samples failed to load than the DataLoader's ``max_skipped`` allows; ``skipped``
    lists them (index, file, error)."""

    def __init__(self, message: str, skipped: list | None = None) -> None:
        super().__init__(message)
        self.skipped = skipped or []

    def __reduce__(self) -> tuple:
        return (type(self), (str(self), self.skipped))


class SkippedSampleWarning(UserWarning):
    """A sample was dropped under the DataLoader's ``skip_errors`` policy."""


# The attribute that carries, on an exception, which sample raised it.
_FAILED_SAMPLE = "_flowloader_sample"


def name_sample(error: BaseException, index: Any, dataset: Any) -> None:
    """Mark ``error`` as raised by sample ``index`` of ``dataset`` (the outermost load that
    lets it pass is the one named: the loader's own dataset where it loads one by one)."""
    with contextlib.suppress(AttributeError, TypeError):  # a type without attributes
        setattr(error, _FAILED_SAMPLE, f"sample {index!r} of {type(dataset).__name__}")


def failed_sample(error: BaseException) -> str | None:
    """Which sample raised ``error`` (name_sample), or None."""
    return getattr(error, _FAILED_SAMPLE, None)
