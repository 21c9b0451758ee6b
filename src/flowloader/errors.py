"""Errors the loader raises itself. All are RuntimeError subclasses, as PyTorch's are."""

from __future__ import annotations

__all__ = [
    "LoaderTimeoutError",
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
