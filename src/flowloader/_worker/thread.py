"""The worker thread (``worker_method="thread"``): the worker body over an in-process queue.

Batches are collated in place, in reused ordinary memory (buffers.py), and handed over as
they are: no shared memory, no pickling, no copy. A thread does not touch the process's
global generators (it shares them with the training loop); per-sample generators (``rngs``)
are what make its batches reproducible.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import Any

from .._ipc import messages
from .body import WorkerConfig
from .buffers import BlockPool, BufferedWorker
from .info import WorkerInfo, set_thread_worker_info


@dataclass(frozen=True)
class ThreadEnded:
    """The worker thread ended on a BaseException (``sys.exit()`` in a dataset, say)."""

    worker_id: int
    how: str


class ThreadWorker(BufferedWorker):
    """A worker thread's body: batches are built in reused blocks (buffers.py) and handed
    over as they are."""

    def __init__(self, config: WorkerConfig, send: Any, pool: BlockPool | None = None) -> None:
        super().__init__(config, send, pool)
        seed = config.base_seed + config.worker_id
        info = WorkerInfo(
            config.worker_id,
            config.num_workers,
            seed,
            config.dataset,
            thread_id=threading.get_ident(),
            worker_method="thread",
        )
        set_thread_worker_info(info)
        self.start()


def run_thread_worker(
    config: WorkerConfig,
    tasks: queue.SimpleQueue,
    results: queue.SimpleQueue,
    pool: BlockPool | None = None,
) -> None:
    """Entry point of a worker thread; returns when told to stop. ``pool``: the loader's
    blocks, shared with its other workers and epochs."""
    try:
        worker = ThreadWorker(config, results.put, pool)
        while True:
            message = tasks.get()
            if isinstance(message, messages.Task):
                worker.run_task(message)
            elif isinstance(message, messages.Resume):
                worker.restart_stream()
            elif isinstance(message, messages.Stop):
                return
    except BaseException as error:  # reported as the worker's death
        results.put(ThreadEnded(config.worker_id, f"ended by {type(error).__name__}: {error}"))
