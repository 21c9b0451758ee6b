"""The Ray actor (``worker_method="ray"``): the worker body as a Ray actor, one per worker.

An actor is a process of its own on some node of the cluster, so it is set up as a worker
process is (its global generators seeded, torch's threads limited, large allocations kept
in the heap) and answers each Task with one reply, returned from the actor method: Ray
copies the batch into its object store once, and the trainer reads it from there without
another copy when both are on one node. Batches are collated into reused blocks (buffers.py),
free again as soon as the reply is stored.

Ray itself is only imported inside the actor's methods: the class travels to the cluster
by reference, and importing this module costs nothing where Ray is not installed.
"""

from __future__ import annotations

import dataclasses
import pickle
import time
from typing import Any

from .. import _seed
from .._compat import torch as _torch
from .._ipc import messages, tree
from .allocator import keep_large_allocations
from .body import WorkerConfig
from .buffers import BufferedWorker
from .info import WorkerInfo, set_worker_info


class RayWorker(BufferedWorker):
    """Worker ``worker_id`` of a loader whose configuration, pickled, is ``shared`` (sent to
    the cluster once for all actors; unpickled here, so that its arrays are this actor's
    own, writable, as in a worker process)."""

    def __init__(self, shared: bytes, worker_id: int) -> None:
        import ray

        self._cloudpickle = ray.cloudpickle  # what Ray pickles replies with
        loaded: WorkerConfig = ray.cloudpickle.loads(shared)
        config = dataclasses.replace(loaded, worker_id=worker_id)
        self._replies: list[Any] = []
        super().__init__(config, self._replies.append)
        keep_large_allocations()
        _torch.when_imported(_torch.limit_threads)
        context = ray.get_runtime_context()
        self.node_id: str = context.get_node_id()
        self.node_address: str = ray.util.get_node_ip_address()
        self.actor_id: str = context.get_actor_id() or ""
        seed = _seed.seed_worker(config.base_seed, worker_id)
        info = WorkerInfo(
            worker_id,
            config.num_workers,
            seed,
            config.dataset,
            worker_method="ray",
            node_id=self.node_id,
        )
        set_worker_info(info)
        self.start()

    def describe(self) -> tuple[int, str, str, str]:
        """(pid, node id, node address, actor id): how errors name this actor."""
        return self.pid, self.node_id, self.node_address, self.actor_id

    def run(self, task: messages.Task) -> Any:
        """The reply to ``task``: a Result carrying the batch itself, or what replaced it."""
        self.run_task(task)
        return self._replies.pop()

    def resume(self) -> None:
        """A new epoch on persistent actors: restart the dataset's stream."""
        self.restart_stream()

    def _send_batch(self, task: messages.Task, batch: Any, arena: Any) -> None:
        """The Result, or a Failure for this batch alone where its non-array parts cannot be
        pickled (as a worker process fails it): Ray would fail the whole call otherwise."""
        structure, _ = tree.split(batch)
        try:
            pickle.dumps(structure, pickle.HIGHEST_PROTOCOL)
        except Exception:
            try:
                self._cloudpickle.dumps(structure)
            except Exception as error:
                self.send(self.failure(task, error, "while sending the batch"))
                return
        self.send(self.result(task, batch, time.process_time()))


__all__ = ["RayWorker"]
