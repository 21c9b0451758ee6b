"""BlockCache: a table's decoded blocks (row groups, record batches) in one process, bounded
in bytes, least recently used first out.

One cache per table per process: the thread workers' copies of a table (``copy.copy``) share
their table's cache, behind one lock, so N threads decode each block once and hold
``cache_bytes`` in all; a table that travels to a worker process (or a Ray actor) by pickle
starts with an empty cache of its own. A block asked by several threads at once is read by
the first and waited for by the others. Once every block is cached, the blocks may be joined
into one array per column (``join_when_whole``), which then is the cache.

A worker process forked from a process whose threads use a cache inherits it as it was:
after a fork the child gets a fresh lock and forgets the reads other threads had under way
(they will never finish there), so that it never waits on either; the blocks already
decoded stay (copy-on-write).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from . import values

# load(block) -> (the block's columns, the bytes they are counted for)
Load = Callable[[int], tuple[values.Columns, int]]


class _Loading:
    """A block one thread is reading: the others wait for ``done``."""

    __slots__ = ("columns", "done")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.columns: values.Columns | None = None  # None after a failed read


class BlockCache:
    """The decoded blocks of a table of ``len(starts) - 1`` blocks (``starts``: each block's
    first row, then the row count), at most ``capacity`` bytes of them (at least one)."""

    def __init__(self, capacity: int, starts: np.ndarray, join_when_whole: bool) -> None:
        self.capacity = int(capacity)
        self._starts = starts
        self._join_when_whole = join_when_whole
        self._lock = threading.Lock()
        self._blocks: OrderedDict[int, values.Columns] = OrderedDict()
        self._charges: dict[int, int] = {}  # block -> the bytes it is counted for
        self._loading: dict[int, _Loading] = {}
        self._failed: dict[int, tuple[OSError, float]] = {}  # unreadable blocks: error, when
        self.bytes = 0  # what the cached blocks are counted for
        self.decoded = 0  # blocks read and converted (misses)
        self.evictions = 0
        self.whole: values.Columns | None = None  # every block, joined
        _CACHES.add(self)

    def _forked(self) -> None:
        """In a forked child: a lock no thread holds, and no read waited for."""
        self._lock = threading.Lock()
        self._loading.clear()

    def __len__(self) -> int:
        """The blocks cached one by one (none once they are joined)."""
        return len(self._blocks)

    def charge_of(self, block: int) -> int | None:
        """The bytes block ``block`` is counted for while it is cached one by one, else
        None."""
        with self._lock:
            return self._charges.get(block)

    def get(self, block: int, load: Load, failed_wait_s: float) -> values.Columns:
        """Block ``block``'s columns: cached, being read by another thread (waited for), or
        read now by ``load``. An OSError from ``load`` is remembered: for ``failed_wait_s``
        the block fails again at once (a copy of the error), then it is read again."""
        while True:
            with self._lock:
                if self.whole is not None:
                    return values.block_of(self.whole, self._starts, block)
                found = self._blocks.get(block)
                if found is not None:
                    self._blocks.move_to_end(block)
                    return found
                failed = self._failed.get(block)
                if failed is not None and time.monotonic() - failed[1] < failed_wait_s:
                    raise _again(failed[0])
                loading = self._loading.get(block)
                reader = loading is None
                if loading is None:
                    loading = self._loading[block] = _Loading()
            if reader:
                return self._read(block, load, loading)
            loading.done.wait()
            if loading.columns is not None:
                return loading.columns
            # The reader failed: its error is remembered (an OSError) or this thread's own
            # read raises its own (another error); go round.

    def _read(self, block: int, load: Load, loading: _Loading) -> values.Columns:
        try:
            columns, charge = load(block)
        except BaseException as error:
            with self._lock:
                del self._loading[block]
                if isinstance(error, OSError):
                    # Unreadable after its tries: ``skip_errors`` then asks for the block
                    # again for each of a batch's rows in it; for a while they fail at once,
                    # not after a read (and a remote file's retries) each. Later it is read
                    # again (an outage passes).
                    self._failed[block] = (error, time.monotonic())
            loading.done.set()
            raise
        with self._lock:
            del self._loading[block]
            self._store(block, columns, charge)
        loading.columns = columns
        loading.done.set()
        return columns

    def _store(self, block: int, columns: values.Columns, charge: int) -> None:
        """Keep a block just read (the lock held), evicting the oldest past ``capacity``."""
        self._blocks[block] = columns
        self._charges[block] = charge
        self.bytes += charge
        self.decoded += 1
        while self.bytes > self.capacity and len(self._blocks) > 1:
            dropped, _ = self._blocks.popitem(last=False)
            self.bytes -= self._charges.pop(dropped)
            self.evictions += 1
        blocks = len(self._starts) - 1
        if self._join_when_whole and self.whole is None and len(self._blocks) == blocks:
            # A shuffled batch touches ~every block: gathering from each costs more than
            # the rows. The joined arrays replace the blocks (about the same bytes).
            ordered = [self._blocks[b] for b in range(blocks)]
            self.whole = {name: values.joined([c[name] for c in ordered]) for name in columns}
            self._blocks.clear()


_CACHES: weakref.WeakSet[BlockCache] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for cache in list(_CACHES):
        cache._forked()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _again(error: OSError) -> OSError:
    """A fresh copy of a block's read error, to raise again (one exception object raised
    in several places, or threads, would pile up tracebacks)."""
    again = OSError(*error.args)
    again.__cause__ = error.__cause__
    return again
