"""FetchedBlocks: a remote table's row groups, once fetched, kept on local disk for every
worker on the machine.

Workers split an epoch by batches, not by row groups, so under a locality-keeping order
(``BlockShuffleSampler``) each worker needs every row group of a window: without sharing, N
workers would fetch each row group N times. Here the first worker to need a row group takes
a lock on it, fetches the selected columns and writes them as an Arrow IPC file (written
whole under another name, then renamed: nothing partial is ever read); the others wait for
the lock and map the file. The folder is bounded in bytes (the least recently written files
go first; a worker still mapping one keeps its pages) and, when flowloader made it, removed
with the dataset by the process that made it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable
from typing import Any

import pyarrow as pa

DEFAULT_LOCAL_BYTES = 8 << 30


class FetchedBlocks:
    """Blocks kept as ``<folder>/<key>.arrow``. ``folder`` None: a new temporary folder,
    removed when ``owner`` is collected (or at exit) in this process."""

    def __init__(self, folder: str | None, max_bytes: int, owner: Any) -> None:
        self.max_bytes = int(max_bytes)
        if folder is None:
            self.folder = tempfile.mkdtemp(prefix="flowloader-table-")
            weakref.finalize(owner, _remove_in, os.getpid(), self.folder)
        else:
            self.folder = os.fspath(folder)
        os.makedirs(self.folder, exist_ok=True)

    def get(self, key: str, fetch: Callable[[], pa.Table]) -> pa.Table:
        """The block ``key``: mapped from the folder, or fetched (by one process at a time)
        and kept there."""
        path = os.path.join(self.folder, key + ".arrow")
        found = _mapped(path)
        if found is not None:
            return found
        os.makedirs(self.folder, exist_ok=True)  # a worker on another machine (Ray)
        with open(path + ".lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the lock file closes
            found = _mapped(path)
            if found is not None:
                return found
            table = fetch()
            partial = f"{path}.{os.getpid()}.partial"
            try:
                with pa.OSFile(partial, "wb") as sink, pa.ipc.new_file(sink, table.schema) as out:
                    out.write_table(table)
                os.replace(partial, path)
            finally:
                if os.path.exists(partial):
                    os.remove(partial)
            self._evict(keep=path)
        return table

    def _evict(self, keep: str) -> None:
        """Remove the oldest blocks until the folder holds at most ``max_bytes``."""
        blocks = []
        for entry in os.scandir(self.folder):
            if entry.name.endswith(".arrow") and entry.path != keep:
                try:
                    info = entry.stat()
                except FileNotFoundError:  # another worker removed it
                    continue
                blocks.append((info.st_mtime_ns, info.st_size, entry.path))
        total = sum(size for _, size, _ in blocks) + os.path.getsize(keep)
        for _, size, path in sorted(blocks):
            if total <= self.max_bytes:
                break
            for name in (path, path + ".lock"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(name)
            total -= size

    def __getstate__(self) -> dict[str, Any]:
        return {"folder": self.folder, "max_bytes": self.max_bytes}


def _mapped(path: str) -> pa.Table | None:
    try:
        source = pa.memory_map(path)
    except FileNotFoundError:
        return None
    return pa.ipc.open_file(source).read_all()


def _remove_in(pid: int, folder: str) -> None:
    """Remove ``folder`` in the process that made it, never in a forked worker."""
    if os.getpid() == pid:
        shutil.rmtree(folder, ignore_errors=True)
