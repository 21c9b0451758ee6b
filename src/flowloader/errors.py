"""Errors the loader raises itself. All are RuntimeError subclasses, as PyTorch's are."""

from __future__ import annotations

__all__ = ["LoaderTimeoutError", "SharedMemoryError", "WorkerCrashedError", "WorkerError"]


class WorkerError(RuntimeError):
    """An exception raised in a worker whose original type could not be rebuilt here."""


class WorkerCrashedError(RuntimeError):
    """A worker process died (killed by a signal, ``os._exit``, a crash in native code...)."""


class LoaderTimeoutError(RuntimeError):
    """No batch arrived within the DataLoader's ``timeout``."""


class SharedMemoryError(RuntimeError):
    """Shared memory (``/dev/shm``) is too small for the batches in flight."""
