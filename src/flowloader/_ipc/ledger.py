"""SegmentLedger: the main process's account of the worker processes' shared-memory segments.

A worker collates each batch into one of its segments and keeps the segment until the main
process says it is free again. The ledger holds this process's mappings (opened once each,
reused), notices when the consumer drops a batch, and owes the segment back to the worker
that made it: the release rides on that worker's next task, or goes alone before a wait.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable
from typing import Any

from .batch_codec import SegmentCache, decode, held_segments


class SegmentLedger:
    """``prefix_of(worker_id)``: how the segments of that worker's current process are named
    (a restarted worker's new process names its segments anew)."""

    def __init__(self, prefix_of: Callable[[int], str]) -> None:
        self.cache = SegmentCache()
        self._prefix_of = prefix_of
        # (worker id, segment name) of batches the consumer dropped; appended by finalizers.
        self._dropped: collections.deque[tuple[int, str]] = collections.deque()
        self._owed: dict[int, list[str]] = collections.defaultdict(list)
        self._on_drop: dict[int, Callable[[str], None]] = {}  # made once per worker id

    def open(self, worker_id: int, encoded: tuple[Any, ...]) -> Any:
        """The batch as views of its segment; the segment is owed back once it is dropped."""
        on_drop = self._on_drop.get(worker_id)
        if on_drop is None:
            # Holds the queue only, not the ledger: batches the user keeps keep nothing else.
            on_drop = self._on_drop[worker_id] = functools.partial(
                _note_drop, self._dropped, worker_id
            )
        return decode(encoded, self.cache, on_drop)

    def forget(self, names: tuple[str, ...]) -> None:
        """The worker retired these segments: unmap them here (views handed out stay valid)."""
        self.cache.forget(names)

    def collect_dropped(self) -> None:
        """Owe each dropped segment to its worker; one of a worker's earlier (dead) process is
        unmapped instead, as no process will use it again."""
        while self._dropped:
            worker_id, name = self._dropped.popleft()
            if name.startswith(self._prefix_of(worker_id)):
                self._owed[worker_id].append(name)
            else:
                self.cache.forget((name,))

    def has_dropped(self) -> bool:
        """Whether the consumer has dropped a batch not yet collected."""
        return bool(self._dropped)

    def releases_for(self, worker_id: int) -> tuple[str, ...]:
        """The segments owed to ``worker_id``, now handed over (to ride on its next task)."""
        return tuple(self._owed.pop(worker_id, ()))

    def owed(self) -> list[tuple[int, tuple[str, ...]]]:
        """Every worker's owed segments, now handed over (sent alone before a wait)."""
        self.collect_dropped()
        owed = [(worker_id, tuple(names)) for worker_id, names in self._owed.items() if names]
        self._owed.clear()
        return owed

    def beyond(self, prefix: str, keep: int) -> tuple[str, ...]:
        """The segments named ``prefix...`` mapped here that no batch the program holds is
        in, beyond ``keep`` segments in all (the held ones count): the smallest first."""
        held = held_segments()
        mine = [name for name in self.cache.names() if name.startswith(prefix)]
        free = [name for name in mine if name not in held]
        room = max(keep - (len(mine) - len(free)), 0)
        free.sort(key=self.cache.capacity)
        return tuple(free[: max(len(free) - room, 0)])

    def worker_replaced(self, worker_id: int, old_prefix: str) -> None:
        """A worker's process died and was replaced: nothing is owed to the dead one, and its
        segments are unmapped here now, not at shutdown (each may be a batch's size). Batches
        the consumer still holds keep their own views."""
        self._owed.pop(worker_id, None)
        self.cache.forget(tuple(n for n in self.cache.names() if n.startswith(old_prefix)))

    def close(self) -> None:
        self.cache.close()


def _note_drop(dropped: collections.deque, worker_id: int, name: str) -> None:
    dropped.append((worker_id, name))
