"""A local directory of whole remote shards, shared by every worker and rank on the machine.

- A shard is downloaded into a temporary file and renamed into place once complete and of
  the expected size, so a partial download is never taken for a shard; a cached file whose
  size no longer matches its index (truncated, corrupt) is fetched again.
- An exclusive ``flock`` per shard: processes that want the same shard at once wait for the
  one downloading it instead of downloading it too.
- ``limit_bytes``: after each download the least recently used shards are deleted until the
  directory fits (a reader that has a shard open keeps reading it: Linux frees the file when
  the last descriptor closes).
- :meth:`prefetch` fetches shards on background threads (the sampler asks for the next ones).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import hashlib
import os
import tempfile
import threading
from collections.abc import Iterable

from . import remote

DEFAULT_DIRECTORY = os.path.join(tempfile.gettempdir(), "flowloader-shards")


class ShardCache:
    """Remote shard URL -> local file path, downloading on first use."""

    def __init__(
        self,
        directory: str | None = None,
        limit_bytes: int | None = None,
        threads: int = 2,
        storage_options: dict | None = None,
    ) -> None:
        self.storage_options = storage_options
        self.directory = directory or os.environ.get("FLOWLOADER_SHARD_CACHE", DEFAULT_DIRECTORY)
        self.limit_bytes = limit_bytes
        self.threads = threads
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._pool_pid = 0
        self._pending: dict[str, concurrent.futures.Future] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.update(_pool=None, _pool_pid=0, _pending={}, _lock=None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def local_name(self, url: str) -> str:
        digest = hashlib.sha1(url.encode()).hexdigest()[:16]
        return os.path.join(self.directory, f"{digest}-{os.path.basename(url) or 'shard'}")

    def path(self, url: str, expected_bytes: int | None = None) -> str:
        """The local copy of ``url``, downloaded (or re-downloaded when its size is not
        ``expected_bytes``) if need be."""
        target = self.local_name(url)
        if _has_size(target, expected_bytes):
            os.utime(target)  # recently used, for eviction
            return target
        os.makedirs(self.directory, exist_ok=True)
        with open(target + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one download per shard on this machine
            try:
                if not _has_size(target, expected_bytes):  # nobody fetched it meanwhile
                    self._download(url, target, expected_bytes)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        self._evict(keep=target)
        return target

    def _download(self, url: str, target: str, expected_bytes: int | None) -> None:
        partial = f"{target}.{os.getpid()}.{threading.get_ident()}.partial"
        try:
            remote.download(url, partial, expected_bytes, self.storage_options)
            os.replace(partial, target)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)

    def prefetch(self, urls: Iterable[str], sizes: dict[str, int] | None = None) -> None:
        """Start fetching ``urls`` in the background (those not cached or under way)."""
        with self._lock:
            if self._pool is None or self._pool_pid != os.getpid():
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    self.threads, thread_name_prefix="flowloader-shard-prefetch"
                )
                self._pool_pid, self._pending = os.getpid(), {}
            for url in urls:
                expected = (sizes or {}).get(url)
                pending = self._pending.get(url)
                if (pending is not None and not pending.done()) or _has_size(
                    self.local_name(url), expected
                ):
                    continue
                self._pending[url] = self._pool.submit(self._quietly, url, expected)

    def _quietly(self, url: str, expected: int | None) -> None:
        with contextlib.suppress(Exception):  # the reader that needs it raises the error
            self.path(url, expected)

    def _evict(self, keep: str) -> None:
        if self.limit_bytes is None:
            return
        entries = []
        for entry in os.scandir(self.directory):
            if entry.name.endswith((".lock", ".partial")) or not entry.is_file():
                continue
            entries.append((entry.stat().st_mtime, entry.stat().st_size, entry.path))
        total = sum(size for _, size, _ in entries)
        for _, size, path in sorted(entries):
            if total <= self.limit_bytes:
                break
            if path != keep:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                total -= size


def _has_size(path: str, expected: int | None) -> bool:
    try:
        size = os.path.getsize(path)
    except OSError:
        return False
    return expected is None or size == expected
