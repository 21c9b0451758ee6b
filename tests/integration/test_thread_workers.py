"""worker_method="thread": the same batches, resume, errors, timeout, persistence, worker info
and stats as worker processes, with threads of this process."""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest

import flowloader as fl
from flowloader.errors import LoaderTimeoutError, WorkerCrashedError

from .loader_datasets import Arrays, Augmented, Failing, SomeBad, Stream


def worker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("flowloader-worker")]


def as_lists(loader) -> list:
    return [np.asarray(b).tolist() for b in loader]


@pytest.fixture(autouse=True)
def no_threads_left():
    yield
    deadline = time.monotonic() + 5
    while worker_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not worker_threads(), f"worker threads left running: {worker_threads()}"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shuffle", [False, True])
def test_batches_are_bit_identical_to_processes_and_to_in_process(shuffle) -> None:
    def batches(**workers) -> list:
        loader = fl.DataLoader(
            Augmented(37), batch_size=4, shuffle=shuffle, generator=11, **workers
        )
        return as_lists(loader)

    in_process = batches()
    assert batches(num_workers=3, worker_method="thread") == in_process
    assert batches(num_workers=2) == in_process


@pytest.mark.timeout(60)
def test_a_stream_is_sharded_by_each_threads_worker_info() -> None:
    threaded = fl.DataLoader(Stream(20), batch_size=3, num_workers=2, worker_method="thread")
    processes = fl.DataLoader(Stream(20), batch_size=3, num_workers=2)
    assert as_lists(threaded) == as_lists(processes)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("saved_with", "resumed_with"),
    [
        ({"num_workers": 2, "worker_method": "thread"}, {"num_workers": 3}),
        ({"num_workers": 3}, {"num_workers": 2, "worker_method": "thread"}),
        ({"num_workers": 2, "worker_method": "thread"}, {}),
    ],
)
def test_resume_is_exact_across_worker_methods(saved_with, resumed_with) -> None:
    def loader(**workers):
        return fl.DataLoader(Augmented(30), batch_size=4, shuffle=True, generator=5, **workers)

    expected = as_lists(loader())
    first = loader(**saved_with)
    iterator = iter(first)
    head = [np.asarray(next(iterator)).tolist() for _ in range(3)]
    state = first.state_dict()
    del iterator
    second = loader(**resumed_with)
    second.load_state_dict(state)
    assert head + as_lists(second) == expected


@pytest.mark.timeout(60)
def test_an_error_keeps_its_type_traceback_and_indices_and_the_epoch_goes_on() -> None:
    loader = fl.DataLoader(
        Failing("exception", bad=5), batch_size=4, num_workers=2, worker_method="thread"
    )
    iterator = iter(loader)
    assert next(iterator).tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="cannot decode sample 5") as caught:
        next(iterator)
    message = str(caught.value)
    assert "Caught ValueError in DataLoader worker 1" in message
    assert "dataset indices [4, 5, 6, 7]" in message
    assert "raised by sample 5 of Failing" in message
    assert "cannot decode sample 5" in message
    assert "Traceback" in message
    assert [b.tolist() for b in iterator] == [[8, 9, 10, 11], [12, 13, 14, 15]]


class Hangs(fl.Dataset):
    """Sample 2 waits until ``release`` is set (a hung read)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int):
        if i == 2:
            self.release.wait(30)
        return np.float32(i)


@pytest.mark.timeout(30)
def test_a_hung_thread_hits_the_timeout() -> None:
    dataset = Hangs()
    loader = fl.DataLoader(
        dataset, batch_size=2, num_workers=2, timeout=0.3, worker_method="thread"
    )
    iterator = iter(loader)
    assert next(iterator).tolist() == [0, 1]
    try:
        with pytest.raises(LoaderTimeoutError, match=r"0.3 seconds.*\[2, 3\]"):
            next(iterator)
    finally:
        dataset.release.set()  # a thread cannot be killed: it ends once its read returns


@pytest.mark.timeout(60)
def test_persistent_threads_serve_every_epoch() -> None:
    seen: list[set[int]] = []
    loader = fl.DataLoader(
        Idents(), batch_size=2, num_workers=2, persistent_workers=True, worker_method="thread"
    )
    for _ in range(3):
        seen.append({int(x) for b in loader for x in b})
        assert len(worker_threads()) == 2
    assert seen[0] == seen[1] == seen[2]
    assert len(seen[0]) == 2
    loader._iterator.shutdown()


class Idents(fl.Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> int:
        return threading.get_ident()


class Described(fl.Dataset):
    """Sample i: what get_worker_info() says where it is loaded, and the shard set by
    worker_init_fn on this worker's own copy of the dataset."""

    shard = -1

    def __len__(self) -> int:
        return 6

    def __getitem__(self, i: int):
        info = fl.get_worker_info()
        assert info.thread_id == threading.get_ident()
        assert info.worker_method == "thread"
        return np.array([info.id, info.num_workers, info.seed, info.dataset.shard])


def set_shard(worker_id: int) -> None:
    fl.get_worker_info().dataset.shard = 10 + worker_id


@pytest.mark.timeout(60)
def test_worker_info_and_worker_init_fn_belong_to_each_thread() -> None:
    dataset = Described()
    loader = fl.DataLoader(
        dataset, batch_size=1, num_workers=2, worker_method="thread", worker_init_fn=set_shard
    )
    rows = [b[0].tolist() for b in loader]
    ids = [row[0] for row in rows]
    assert ids == [0, 1, 0, 1, 0, 1]
    assert all(row[1] == 2 for row in rows)
    assert {row[2] - row[0] for row in rows} == {rows[0][2]}  # seed = base seed + id
    assert [row[3] for row in rows] == [10 + i for i in ids]
    assert dataset.shard == -1  # the user's dataset is untouched
    assert fl.get_worker_info() is None


@pytest.mark.timeout(60)
def test_stats_say_threads_and_count_their_cpu() -> None:
    loader = fl.DataLoader(Arrays(40), batch_size=4, num_workers=2, worker_method="thread")
    iterator = iter(loader)
    for _ in iterator:
        pass
    stats = iterator.stats()
    assert stats.worker_method == "thread"
    assert stats.num_workers == 2
    assert stats.batches == 10
    assert stats.worker_cpu_s > 0
    assert stats.free_threaded == (not getattr(sys, "_is_gil_enabled", lambda: True)())


@pytest.mark.timeout(60)
def test_skip_errors_with_threads_matches_processes() -> None:
    def run(**workers):
        loader = fl.DataLoader(SomeBad(), batch_size=4, skip_errors=ValueError, **workers)
        with pytest.warns(fl.errors.SkippedSampleWarning):
            return as_lists(loader)

    assert run(num_workers=2, worker_method="thread") == run(num_workers=2) == run()


class ExitsOnce(fl.Dataset):
    """Sample ``bad`` ends its worker thread with sys.exit() the first time it is loaded."""

    def __init__(self) -> None:
        self.exited = threading.Event()

    def __len__(self) -> int:
        return 12

    def __getitem__(self, i: int):
        if i == 5 and not self.exited.is_set():
            self.exited.set()
            sys.exit(2)
        return np.float32(i)


@pytest.mark.timeout(60)
def test_a_thread_that_ends_is_a_crash_and_can_be_restarted() -> None:
    crashing = fl.DataLoader(ExitsOnce(), batch_size=2, num_workers=2, worker_method="thread")
    with pytest.raises(WorkerCrashedError, match=r"worker 0 \(a thread\).*SystemExit"):
        as_lists(crashing)
    restarted = fl.DataLoader(
        ExitsOnce(), batch_size=2, num_workers=2, worker_method="thread", max_worker_restarts=1
    )
    with pytest.warns(RuntimeWarning, match="restarting it"):
        assert np.concatenate(as_lists(restarted)).tolist() == list(range(12))


def test_thread_workers_refuse_a_multiprocessing_context() -> None:
    with pytest.raises(ValueError, match="only applies to worker_method='multiprocessing'"):
        fl.DataLoader(
            Arrays(), num_workers=2, worker_method="thread", multiprocessing_context="spawn"
        )
    with pytest.raises(ValueError, match="worker_method should be one of"):
        fl.DataLoader(Arrays(), num_workers=2, worker_method="threads")


class CountsLoads(fl.Dataset):
    """Each load takes ``delay_s`` and is counted (each thread's shallow copy of the dataset
    shares the list)."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s, self.loads = delay_s, []

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> int:
        time.sleep(self.delay_s)
        self.loads.append(i)
        return i


@pytest.mark.timeout(60)
def test_a_break_stops_the_threads_without_loading_what_was_prefetched() -> None:
    dataset = CountsLoads(delay_s=0.2)
    loader = fl.DataLoader(
        dataset, batch_size=1, num_workers=2, worker_method="thread", prefetch_factor=8
    )
    for _ in loader:
        loaded_at_break = len(dataset.loads)
        break  # 16 batches were queued; at most the 2 being loaded may still finish
    deadline = time.monotonic() + 5
    while worker_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(dataset.loads) <= loaded_at_break + 2
