"""BlockCache: one per table per process. Thread workers' copies of a table share it (one
cache, one lock, ``cache_bytes`` in all) and a block asked by several threads at once is
read once; a pickled table (a worker process, a Ray actor) starts empty; a failed read lets
the waiting threads go."""

from __future__ import annotations

import copy
import pickle
import threading

import pytest

pytest.importorskip("pyarrow", reason="needs pyarrow (pip install 'flowloader[tables]')")

import numpy as np

from flowloader.tables import ArrowDataset, ParquetDataset
from flowloader.tables.cache import BlockCache

from .conftest import assert_row
from .test_arrow import write_ipc

STARTS = np.array([0, 10, 20, 30], dtype=np.int64)


def block(b: int) -> dict[str, np.ndarray]:
    return {"x": np.arange(STARTS[b], STARTS[b + 1])}


def test_thread_copies_share_the_cache_and_a_pickle_starts_empty(parquet_folder) -> None:
    ds = ParquetDataset(parquet_folder, cache_bytes=1 << 30)
    ds[0]
    shared = copy.copy(ds)
    assert shared._cache is ds._cache
    assert_row(shared[5], 5)
    shared[150]  # read by the copy: the original has it too
    assert ds.decoded_blocks == shared.decoded_blocks == 2
    shared.note = "a worker_init_fn's own attribute"
    assert not hasattr(ds, "note")
    pickled = pickle.loads(pickle.dumps(ds))
    assert pickled._cache is not ds._cache
    assert pickled.decoded_blocks == 0
    assert len(pickled._cache) == 0
    assert_row(pickled[150], 150)


def test_an_arrow_table_copy_shares_it_too(tmp_path) -> None:
    from .conftest import table

    write_ipc(tmp_path / "t.arrow", table(300), stream=True, rows_per_batch=100)
    ds = ArrowDataset(tmp_path / "t.arrow")
    copy.copy(ds).__getitems__([0, 150, 299])
    assert ds.decoded_blocks == 3
    assert len(pickle.loads(pickle.dumps(ds))._cache) == 0


def test_a_block_asked_by_several_threads_at_once_is_read_once() -> None:
    cache = BlockCache(1 << 20, STARTS, join_when_whole=False)
    reads: list[int] = []
    arrived = threading.Barrier(4)
    release = threading.Event()

    def load(b: int) -> tuple[dict[str, np.ndarray], int]:
        reads.append(b)
        release.wait(10)  # the other threads ask meanwhile
        return block(b), 80

    got: list[np.ndarray] = []

    def ask() -> None:
        arrived.wait(10)
        got.append(cache.get(1, load, 30.0)["x"])

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    while not reads:
        threading.Event().wait(0.005)
    threading.Event().wait(0.05)  # the others reach the wait
    release.set()
    for thread in threads:
        thread.join(10)
    assert reads == [1]
    assert cache.decoded == 1
    assert len(got) == 4
    assert all(x.tolist() == list(range(10, 20)) for x in got)


def test_a_failed_read_lets_the_waiting_threads_go() -> None:
    cache = BlockCache(1 << 20, STARTS, join_when_whole=False)
    started, release = threading.Event(), threading.Event()

    def failing(b: int) -> tuple[dict[str, np.ndarray], int]:
        started.set()
        release.wait(10)
        raise OSError(f"block {b}: cannot read")

    errors: list[BaseException] = []

    def wait_for_it() -> None:
        started.wait(10)
        try:
            cache.get(2, lambda b: pytest.fail("read again within the wait"), 30.0)
        except OSError as error:
            errors.append(error)

    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    reader_errors: list[BaseException] = []

    def read() -> None:
        try:
            cache.get(2, failing, 30.0)
        except OSError as error:
            reader_errors.append(error)

    reader = threading.Thread(target=read)
    reader.start()
    started.wait(10)
    threading.Event().wait(0.05)
    release.set()
    reader.join(10)
    waiter.join(10)
    assert [str(e) for e in reader_errors + errors] == ["block 2: cannot read"] * 2
    assert errors[0] is not reader_errors[0]  # a copy: one object raised in two threads
    assert not cache._loading
    # Another error is not remembered: the next ask reads the block itself.
    with pytest.raises(ValueError, match="bad"):
        cache.get(0, lambda b: (_ for _ in ()).throw(ValueError("bad")), 30.0)
    assert cache.get(0, lambda b: (block(b), 80), 30.0)["x"].tolist() == list(range(10))


def test_the_cache_keeps_at_most_its_bytes_and_at_least_one_block() -> None:
    cache = BlockCache(150, STARTS, join_when_whole=False)
    for b in range(3):
        cache.get(b, lambda b: (block(b), 80), 30.0)
    assert len(cache) == 1
    assert cache.bytes == 80
    assert cache.evictions == 2
    joined = BlockCache(1 << 20, STARTS, join_when_whole=True)
    for b in (2, 0, 1):
        joined.get(b, lambda b: (block(b), 80), 30.0)
    assert joined.whole is not None
    assert len(joined) == 0
    assert joined.get(1, pytest.fail, 30.0)["x"].tolist() == list(range(10, 20))


def _child_reads(cache: BlockCache, done) -> None:
    columns = cache.get(1, lambda b: (block(b), 80), 30.0)
    done.put(columns["x"].tolist())


def test_a_forked_child_neither_waits_on_the_lock_nor_on_reads_under_way() -> None:
    """A process forked while another thread held the lock and was reading a block (a
    thread loader beside a process loader on one table) reads the block itself."""
    import multiprocessing

    from flowloader.tables.cache import _Loading

    cache = BlockCache(1 << 20, STARTS, join_when_whole=False)
    cache.get(0, lambda b: (block(b), 80), 30.0)
    context = multiprocessing.get_context("fork")
    done = context.Queue()
    with cache._lock:  # as if another thread held it at the fork
        cache._loading[1] = _Loading()  # and were reading block 1
        child = context.Process(target=_child_reads, args=(cache, done))
        child.start()
    try:
        assert done.get(timeout=20) == list(range(10, 20))
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0
    assert 1 in cache._loading  # the parent's own read is still its own


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_the_loader_s_memory_counts_the_cache_its_threads_share(
    parquet_folder, num_workers
) -> None:
    """Thread workers and in-process loading fill this process's cache: the memory budget's
    account holds it (stats().memory["caches_bytes"]), found through a Subset."""
    import flowloader as fl

    ds = ParquetDataset(parquet_folder, cache_bytes=1 << 30)
    subset = fl.Subset(ds, list(range(len(ds))))
    loader = fl.DataLoader(
        subset, batch_size=50, num_workers=num_workers, worker_method="thread", collate_fn=list
    )
    iterator = iter(loader)
    batches = list(iterator)
    report = iterator.stats().memory
    assert len(batches) == -(-len(ds) // 50)
    assert ds.cached_bytes > 0
    assert 0 < report["caches_bytes"] <= ds.cached_bytes
    assert report["peak"] >= report["caches_bytes"]
