"""The worker loop in this process, over two pipes and no child process (as SPDL tests its
worker body): tasks in, results and failures out, shared memory handed over and cleaned up."""

from __future__ import annotations

import io
import multiprocessing
import os
import pickle
import signal

import numpy as np

import flowloader as fl
from flowloader._ipc import messages, shm
from flowloader._ipc.batch_codec import SegmentCache, decode
from flowloader._worker.info import set_worker_info
from flowloader._worker.process import WorkerConfig, run_worker


class Squares(fl.Dataset):
    def __len__(self) -> int:
        return 10

    def __getitem__(self, i: int):
        if i == 7:
            raise ValueError("sample 7 is broken")
        return np.full(3, i * i, np.int64)


class _NotAResult(Exception):
    pass


class _OnlySlots(pickle.Unpickler):
    """Unpickles a Result's fields, which reference no class but the batch's Slots."""

    def find_class(self, module: str, name: str) -> type:
        if (module, name) == ("flowloader._ipc.tree", "Slot"):
            return super().find_class(module, name)
        raise _NotAResult(f"{module}.{name}")


def run_in_process(tasks: list) -> list:
    """Feed ``tasks`` and a Stop to run_worker here; return what it sent back (a Result
    arrives as the tuple of its fields, and is rebuilt here)."""
    task_reader, task_writer = multiprocessing.Pipe(duplex=False)
    result_reader, result_writer = multiprocessing.Pipe(duplex=False)
    config = WorkerConfig(
        worker_id=0,
        num_workers=1,
        dataset=Squares(),
        iterable=False,
        auto_collation=True,
        collate_fn=fl.default_collate,
        drop_last=False,
        base_seed=3,
        worker_init_fn=None,
        segment_prefix=f"{shm.process_prefix()}loop_",
        main_pid=os.getpid(),
    )
    for task in [*tasks, messages.Stop()]:
        task_writer.send(task)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        run_worker(config, task_reader, result_writer)  # returns at the Stop
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
        set_worker_info(None)  # the loop made this process a worker; it is the main one again
    replies = []
    while result_reader.poll():
        data = result_reader.recv_bytes()
        try:  # a Result, sent as its fields: unpickling it looks up no class but the Slots
            replies.append(messages.Result(*_OnlySlots(io.BytesIO(data)).load()))
        except _NotAResult:
            replies.append(pickle.loads(data))
    for conn in (task_reader, task_writer, result_reader, result_writer):
        conn.close()
    return replies


def test_the_worker_loop_answers_each_task_in_order() -> None:
    # Tasks come as their field tuples (as the main process sends them) or as Tasks.
    replies = run_in_process(
        [messages.Task(0, 0, [1, 2], epoch_seed=5).on_wire(),
         messages.Task(0, 1, [6, 7], epoch_seed=5), (0, 2, [3], (), 5)]
    )  # fmt: skip
    assert [type(r).__name__ for r in replies] == ["Result", "Failure", "Result"]
    assert [r.task_id for r in replies] == [0, 1, 2]
    failure = replies[1].error.rebuild()
    assert isinstance(failure, ValueError)
    assert "sample 7 is broken" in str(failure)
    assert "[6, 7]" in str(failure)
    cache, dropped = SegmentCache(), []
    first = decode(replies[0].batch, cache, dropped.append)
    third = decode(replies[2].batch, cache, dropped.append)
    assert first.tolist() == [[1, 1, 1], [4, 4, 4]]
    assert third.tolist() == [[9, 9, 9]]
    # The worker has gone; the batches it finished stay readable, and no file is left.
    assert shm.list_segments(f"{shm.process_prefix()}loop_") == []
    del first, third
    cache.close()
