"""Named shared-memory segments backed by files in /dev/shm (a temp dir where there is none).

We manage the files ourselves instead of using ``multiprocessing.shared_memory`` so that no
resource tracker unlinks or warns behind our back (bpo-39959), and so that space is reserved
with ``posix_fallocate`` when a segment is created: running out of /dev/shm then raises a clear
:class:`~flowloader.errors.SharedMemoryError` instead of killing a process with SIGBUS when a
page is first touched (pytorch#5040). Every name starts with ``flowloader_<pid>_`` so that
leftovers of a process can be found and removed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import tempfile
from typing import Any

import numpy as np

from ..errors import SharedMemoryError
from .mapping import map_shared

DEFAULT_SHM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
NAME_PREFIX = "flowloader_"
ALIGNMENT = 64

_ADVICE = (
    "Free space in {dir}, give the container more (docker run --shm-size=8g), point "
    "FLOWLOADER_SHM_DIR at a larger tmpfs, or load less at once: fewer num_workers, a smaller "
    "prefetch_factor or batch_size."
)


def shm_dir() -> str:
    """Where segments live: $FLOWLOADER_SHM_DIR if set (e.g. a bigger tmpfs), else /dev/shm."""
    return os.environ.get("FLOWLOADER_SHM_DIR") or DEFAULT_SHM_DIR


def process_prefix(pid: int | None = None) -> str:
    """The prefix of every segment created on behalf of main process ``pid``."""
    return f"{NAME_PREFIX}{os.getpid() if pid is None else pid}_"


def aligned(nbytes: int) -> int:
    return (nbytes + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def free_bytes() -> int:
    """Bytes available to us in the shared-memory directory."""
    stats = os.statvfs(shm_dir())
    return stats.f_bavail * stats.f_frsize


def check_free_space(minimum: int) -> None:
    """Fail early, with advice, when the shared-memory directory is nearly full."""
    available = free_bytes()
    if available < minimum:
        raise SharedMemoryError(
            f"only {available / 2**20:.1f} MiB of shared memory is free in {shm_dir()}, and the "
            f"DataLoader needs at least {minimum / 2**20:.1f} MiB to start its workers. "
            + _ADVICE.format(dir=shm_dir())
        )


class Segment:
    """One mapped segment. ``array`` is a uint8 view of all of it; the mapping holds no file
    descriptor and lasts until the last array viewing ``mapping`` is gone."""

    def __init__(self, name: str, capacity: int, mapping: Any) -> None:
        self.name = name
        self.capacity = capacity
        self.mapping = mapping
        self.array = np.frombuffer(mapping, dtype=np.uint8)
        self.address = self.array.ctypes.data

    @classmethod
    def create(cls, name: str, capacity: int) -> Segment:
        path = os.path.join(shm_dir(), name)
        fd = _open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR)
        try:
            os.ftruncate(fd, capacity)
            _reserve(fd, capacity, path)
            mapping = _map(fd, capacity, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            raise
        finally:
            os.close(fd)
        return cls(name, capacity, mapping)

    @classmethod
    def attach(cls, name: str, capacity: int) -> Segment:
        path = os.path.join(shm_dir(), name)
        fd = _open(path, os.O_RDWR)
        try:
            mapping = _map(fd, capacity, path)
        finally:
            os.close(fd)
        return cls(name, capacity, mapping)

    def unlink(self) -> None:
        unlink(self.name)

    def close(self) -> None:
        """Drop our views: the pages are unmapped now, or when the last array handed to the
        user that views them is gone. Safe to call again (also from a signal handler that
        interrupts a close)."""
        self.array = None  # type: ignore[assignment]
        self.mapping = None


def _open(path: str, flags: int) -> int:
    try:
        return os.open(path, flags, 0o600)
    except OSError as error:
        if error.errno in (errno.EMFILE, errno.ENFILE):
            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
            raise SharedMemoryError(
                f"out of file descriptors opening the shared-memory segment {path} (this "
                f"process's limit, ulimit -n, is {soft}; flowloader holds none per batch, so "
                "the rest of the program has them open). Raise the limit (ulimit -n 65536, or "
                "resource.setrlimit(resource.RLIMIT_NOFILE, ...)) or close files."
            ) from error
        raise


def _map(fd: int, capacity: int, path: str) -> Any:
    try:
        return map_shared(fd, capacity)
    except OSError as error:
        if error.errno == errno.ENOMEM:
            raise SharedMemoryError(
                f"out of memory mappings mapping {capacity / 2**20:.1f} MiB of {path}: every "
                "batch held maps one segment, and the kernel allows vm.max_map_count mappings "
                f"per process ({_max_map_count()}). Hold fewer batches at once (copy the ones "
                "you keep: np.array(batch)), or raise it: sysctl -w vm.max_map_count=262144."
            ) from error
        raise


def _max_map_count() -> str:
    try:
        with open("/proc/sys/vm/max_map_count") as stream:
            return stream.read().strip()
    except OSError:
        return "unknown"


def _reserve(fd: int, capacity: int, path: str) -> None:
    if not hasattr(os, "posix_fallocate"):
        return
    try:
        os.posix_fallocate(fd, 0, capacity)
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.ENOMEM):
            raise SharedMemoryError(
                f"out of shared memory: could not reserve {capacity / 2**20:.1f} MiB for a batch "
                f"in {path} ({free_bytes() / 2**20:.1f} MiB free). " + _ADVICE.format(dir=shm_dir())
            ) from None
        if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise


def unlink(name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(shm_dir(), name))


def unlink_all(prefix: str) -> list[str]:
    """Remove every segment whose name starts with ``prefix``; returns the names removed."""
    removed = []
    for name in os.listdir(shm_dir()):
        if name.startswith(prefix):
            unlink(name)
            removed.append(name)
    return removed


def list_segments(prefix: str = NAME_PREFIX) -> list[str]:
    return sorted(name for name in os.listdir(shm_dir()) if name.startswith(prefix))
