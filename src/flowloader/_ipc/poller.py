"""Waiting on pipes and process sentinels with one ``poll`` object registered once.

``Connection.poll()`` and ``multiprocessing.connection.wait`` build a new selector on every
call; at one or more waits per batch that cost shows up on small batches.
"""

from __future__ import annotations

import select
from typing import Any

_READABLE = select.POLLIN | select.POLLHUP | select.POLLERR | select.POLLNVAL


class Poller:
    """Readiness of a fixed set of file descriptors (or objects with ``fileno()``)."""

    def __init__(self, handles: list[Any]) -> None:
        self._poll = select.poll()
        self._by_fd: dict[int, Any] = {}
        for handle in handles:
            self.watch(handle)

    def watch(self, handle: Any) -> None:
        """Start watching ``handle`` (a restarted worker's pipe and sentinel)."""
        fd = handle if isinstance(handle, int) else handle.fileno()
        self._by_fd[fd] = handle
        self._poll.register(fd, _READABLE)

    def ready(self, timeout_s: float | None) -> list[Any]:
        """The handles readable (or closed) within ``timeout_s``; None waits indefinitely."""
        timeout_ms = None if timeout_s is None else max(0, int(timeout_s * 1000 + 0.999))
        return [self._by_fd[fd] for fd, _ in self._poll.poll(timeout_ms)]

    def any_ready(self) -> bool:
        """Whether any handle is readable (or closed) now, without building the list."""
        return bool(self._poll.poll(0))

    def forget(self, handle: Any) -> None:
        """Stop watching ``handle`` (a dead worker's pipe and sentinel stay readable forever)."""
        fd = handle if isinstance(handle, int) else handle.fileno()
        if self._by_fd.pop(fd, None) is not None:
            self._poll.unregister(fd)
