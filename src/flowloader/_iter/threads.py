"""Worker threads (``worker_method="thread"``): ``num_workers`` threads run the worker body
over in-process queues. A batch is collated in ordinary memory and handed over as it is: no
shared memory, no pickling, no copy. Each thread gets a shallow copy of the dataset, so that
what ``worker_init_fn`` sets on ``get_worker_info().dataset`` stays its own.

Threads gain where loading releases the GIL (image decoding, NumPy, the native JPEG kernel)
or where Python runs without it (free-threaded CPython); pure-Python transforms take turns.
"""

from __future__ import annotations

import copy
import queue
import threading
import time
from typing import Any

from .._ipc import messages
from .._plan import LoadPlan
from .._worker.thread import ThreadEnded, run_thread_worker
from .events import Assignment, Event, WorkerDied, from_reply
from .transport import STOP_GRACE_S, worker_config


def _own_copy(dataset: Any, memo: dict[int, Any] | None = None) -> Any:
    """A shallow copy (attributes its own, arrays shared); the dataset itself if it has none.
    Whatever inside takes an epoch (an attribute, or an item of a list, tuple or dict
    attribute, with a ``set_epoch``: the Mixture a Packed, a Subset or a user's wrapper
    holds) is copied too, all the way down: a copy that sets its epoch never moves another
    copy's, nor the main process's (a late worker of the last epoch would otherwise move the
    next epoch's Mixture back)."""
    memo = {} if memo is None else memo
    if id(dataset) in memo:
        return memo[id(dataset)]
    try:
        copied = copy.copy(dataset)
    except Exception:
        return dataset
    memo[id(dataset)] = copied
    attributes = getattr(copied, "__dict__", None)
    if not isinstance(attributes, dict):
        return copied
    for name, value in list(attributes.items()):
        if _takes_epoch(value):
            attributes[name] = _own_copy(value, memo)
        elif type(value) in (list, tuple) and any(map(_takes_epoch, value)):
            attributes[name] = type(value)(
                _own_copy(item, memo) if _takes_epoch(item) else item for item in value
            )
        elif type(value) is dict and any(map(_takes_epoch, value.values())):
            attributes[name] = {
                key: _own_copy(item, memo) if _takes_epoch(item) else item
                for key, item in value.items()
            }
    return copied


def _takes_epoch(value: Any) -> bool:
    return not isinstance(value, type) and callable(getattr(value, "set_epoch", None))


class ThreadTransport:
    prefetches = True
    worker_method = "thread"

    def __init__(self, plan: LoadPlan, base_seed: int) -> None:
        self._plan, self._base_seed = plan, base_seed
        self._results: queue.SimpleQueue = queue.SimpleQueue()
        self._tasks: list[queue.SimpleQueue] = []
        self._threads: list[threading.Thread] = []
        self._generation = 0
        self._closed = False
        for worker_id in range(plan.num_workers):
            self._tasks.append(queue.SimpleQueue())
            self._threads.append(self._start(worker_id))

    def _start(self, worker_id: int) -> threading.Thread:
        plan = self._plan
        config = worker_config(plan, worker_id, self._base_seed, dataset=_own_copy(plan.dataset))
        thread = threading.Thread(
            target=run_thread_worker,
            args=(config, self._tasks[worker_id], self._results, plan.thread_blocks),
            name=f"flowloader-worker-{worker_id}",
            daemon=True,
        )
        thread.start()
        return thread

    def send(self, assignments: list[Assignment]) -> None:
        for a in assignments:
            self._tasks[a.worker_id].put(a.task(self._generation))

    def receive(self, timeout: float | None) -> list[Event]:
        results = self._results
        try:
            arrived = [results.get(block=timeout != 0, timeout=timeout or None)]
        except queue.Empty:
            return []
        while True:
            try:
                arrived.append(results.get_nowait())
            except queue.Empty:
                break
        return [event for m in arrived if (event := self._event(m)) is not None]

    def _event(self, message: Any) -> Event | None:
        if isinstance(message, ThreadEnded):
            self._threads[message.worker_id].join()
            return WorkerDied(message.worker_id, None, message.how)
        if message.generation != self._generation:
            return None  # from an epoch that ended early
        return from_reply(message, getattr(message, "batch", None))

    def restart(self, worker_id: int) -> None:
        self._tasks[worker_id] = queue.SimpleQueue()  # what the dead thread left is re-sent
        self._threads[worker_id] = self._start(worker_id)

    def new_epoch(self) -> None:
        self._generation += 1
        if self._plan.thread_blocks is not None:
            self._plan.thread_blocks.open_epoch()
        if self._plan.iterable:
            for tasks in self._tasks:
                tasks.put(messages.Resume())

    def stage_readings(self) -> dict[str, float] | None:
        return None

    def shutdown(self, grace_s: float | None = None) -> None:
        if self._closed:
            return
        self._closed = True
        for tasks in self._tasks:
            _drop_queued(tasks)  # Stop comes next, not after every batch prefetched
            tasks.put(messages.Stop())
        deadline = time.monotonic() + (STOP_GRACE_S if grace_s is None else grace_s)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))


def _drop_queued(tasks: queue.SimpleQueue) -> None:
    while True:
        try:
            tasks.get_nowait()
        except queue.Empty:
            return
