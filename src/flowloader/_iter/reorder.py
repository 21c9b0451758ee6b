"""ReorderBuffer: results arrive in any order; hand them out in task order (or as they come,
``in_order=False``, keeping count of those handed out ahead of one still to come: while any
is, what was handed out is not a prefix of the order, and no position describes it)."""

from __future__ import annotations

from typing import Any


class ReorderBuffer:
    def __init__(self, in_order: bool) -> None:
        self.in_order = in_order
        self.reset()

    def reset(self) -> None:
        self._ready: dict[int, Any] = {}
        self._skipped: set[int] = set()
        self._next = 0  # in order: the next to hand out; else the first not handed out yet
        self._ahead: set[int] = set()  # (in_order=False) handed out beyond _next
        self.last = -1  # the task id of the item popped last

    @property
    def ahead(self) -> int:
        """How many were handed out ahead of one not handed out yet (0 in order)."""
        return len(self._ahead)

    def _passed(self, task_id: int) -> None:
        if task_id != self._next:
            self._ahead.add(task_id)
            return
        self._next += 1
        while self._next in self._ahead:
            self._ahead.remove(self._next)
            self._next += 1

    def add(self, task_id: int, item: Any) -> None:
        self._ready[task_id] = item

    def skip(self, task_id: int) -> None:
        """This task produced nothing (its stream had ended); do not wait for it."""
        if not self.in_order:
            self._passed(task_id)
            return
        self._skipped.add(task_id)

    def pop(self) -> tuple[bool, Any]:
        """(True, item) for the next item to hand out, or (False, None) if it is not here yet."""
        if not self.in_order:
            if not self._ready:
                return False, None
            task_id = self.last = next(iter(self._ready))
            self._passed(task_id)
            return True, self._ready.pop(task_id)
        while self._next in self._skipped:
            self._skipped.remove(self._next)
            self._next += 1
        if self._next not in self._ready:
            return False, None
        item = self._ready.pop(self._next)
        self.last = self._next
        self._next += 1
        return True, item
