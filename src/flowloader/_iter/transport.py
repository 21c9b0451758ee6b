"""What the iterator asks of a transport: the one interface the four of them implement.

- in-process (``num_workers=0``): loads each assignment when the iterator waits for it;
- worker processes (``worker_method="multiprocessing"``): pipes and shared memory;
- worker threads (``worker_method="thread"``): queues, batches handed over as they are;
- Ray actors (``worker_method="ray"``): actor calls, batches through Ray's object store.
"""

from __future__ import annotations

from typing import Any, Protocol

from .._plan import LoadPlan
from .._worker.body import WorkerConfig
from .events import Assignment, Event

# Stop message -> exit, for all workers together (not per worker, cf. pytorch#81794). A
# process still running after it is terminated; a thread is left to finish on its own (a
# thread cannot be killed) and ends with the process (daemon).
STOP_GRACE_S = 2.0


def worker_config(plan: LoadPlan, worker_id: int, base_seed: int, **only: Any) -> WorkerConfig:
    """What worker ``worker_id`` of ``plan`` runs with; ``only``: what one transport adds
    (a process's segment prefix, a thread's own copy of the dataset)."""
    fields: dict[str, Any] = {
        "worker_id": worker_id,
        "num_workers": plan.num_workers,
        "dataset": plan.dataset,
        "iterable": plan.iterable,
        "auto_collation": plan.auto_collation,
        "collate_fn": plan.collate_to_run,
        "drop_last": plan.drop_last,
        "base_seed": base_seed,
        "worker_init_fn": plan.worker_init_fn,
        "skip_errors": plan.skip_errors,
    }
    return WorkerConfig(**(fields | only))


class Transport(Protocol):
    # True: assignments are sent ahead (prefetch); False: each is loaded when waited for.
    prefetches: bool
    # "", "process", "thread" or "ray": what stats() says.
    worker_method: str

    def send(self, assignments: list[Assignment]) -> None:
        """Hand these batches to their workers."""
        ...

    def receive(self, timeout: float | None) -> list[Event]:
        """What happened within ``timeout`` seconds (None: wait for something; 0: only what
        has already arrived), as events, oldest first; a worker's death after its messages."""
        ...

    def restart(self, worker_id: int) -> None:
        """Replace the dead worker ``worker_id`` by a new one with the same id and seed."""
        ...

    def new_epoch(self) -> None:
        """A new epoch on the same (persistent) workers: what is in flight is stale."""
        ...

    def stage_readings(self) -> dict[str, float] | None:
        """Stage seconds not reported by events (in-process loading reports them lazily)."""
        ...

    def shutdown(self, grace_s: float | None = None) -> None:
        """Stop the workers (``grace_s=0``: without the polite stage); idempotent."""
        ...
