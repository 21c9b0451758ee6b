"""Dispatcher: which worker loads the next batch, within the prefetch budget.

Tasks go round-robin over the workers that are still active (a worker whose IterableDataset
stream ended is not), as in PyTorch, so a stream's batches come out in the same order.
"""

from __future__ import annotations

from typing import Any


class Dispatcher:
    def __init__(self, num_workers: int, budget: int) -> None:
        self.num_workers = num_workers
        self.budget = budget
        self.reset()

    def reset(self) -> None:
        """Start a new epoch: every worker active, nothing outstanding, task ids from 0."""
        self.active = [True] * self.num_workers
        self.outstanding: dict[int, tuple[int, Any]] = {}
        self.next_task_id = 0
        self._cursor = 0

    def has_room(self) -> bool:
        return len(self.outstanding) < self.budget

    def next_worker(self) -> int | None:
        """The worker the next task goes to (without assigning), or None if none is active."""
        for step in range(self.num_workers):
            worker = (self._cursor + step) % self.num_workers
            if self.active[worker]:
                return worker
        return None

    def assign(self, worker: int, indices: Any) -> int:
        task_id = self.next_task_id
        self.next_task_id += 1
        self.outstanding[task_id] = (worker, indices)
        self._cursor = (worker + 1) % self.num_workers
        return task_id

    def adopt(self, task_id: int, indices: Any) -> int:
        """Take over a task another dispatcher handed out (a live change of workers): it
        keeps its id and goes to the next worker in turn, beside the budget. Returns the
        worker."""
        worker = self.next_worker()
        assert worker is not None
        self.outstanding[task_id] = (worker, indices)
        self._cursor = (worker + 1) % self.num_workers
        self.next_task_id = max(self.next_task_id, task_id + 1)
        return worker

    def complete(self, task_id: int) -> tuple[int, Any]:
        return self.outstanding.pop(task_id)

    def deactivate(self, worker: int) -> None:
        self.active[worker] = False

    def abandon(self, worker: int) -> list[int]:
        """A worker died: stop handing out tasks (to anyone: the epoch ends where its data
        stops), and drop its outstanding tasks. Returns their task ids, oldest first."""
        lost = sorted(t for t, (owner, _) in self.outstanding.items() if owner == worker)
        for task_id in lost:
            del self.outstanding[task_id]
        self.active = [False] * self.num_workers
        return lost

    def requeue(self, worker: int) -> list[tuple[int, Any]]:
        """A worker died and is being replaced: its outstanding tasks, oldest first, as
        (task id, indices), to be assigned again under the same ids. Its round-robin turn
        and the budget they used stay as they were."""
        return sorted((t, i) for t, (owner, i) in self.outstanding.items() if owner == worker)

    def idle(self) -> bool:
        return not self.outstanding

    def pending(self, worker: int | None = None) -> list[Any]:
        """Indices of the outstanding tasks (of one worker, or of all), oldest first."""
        return [
            indices
            for _, (owner, indices) in sorted(self.outstanding.items())
            if worker is None or owner == worker
        ]
