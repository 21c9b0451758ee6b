"""Thread workers build large batches in reused blocks (_worker/buffers.py), end to end: the
right contents, no held batch written over while its block would be reused, a batch that
outgrows its block, blocks for batches that become large later on, and blocks kept for the
loader's next epoch until it loads with another kind of worker.

The block threshold (32 MiB) is lowered through the private knob ``MIN_BLOCK_BYTES``, which a
worker thread reads when it starts, so that small batches take the block path."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import flowloader as fl
from flowloader._worker import buffers


class Rows(fl.Dataset):
    """Sample i: a row of float32s filled with i (``large`` wide from ``large_from`` on), and
    i as an array (so that both fields are built in the batch's block)."""

    def __init__(self, n: int, small: int, large: int = 0, large_from: int | None = None) -> None:
        self.n, self.small, self.large = n, small, large
        self.large_from = n if large_from is None else large_from

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        width = self.large if i >= self.large_from else self.small
        return np.full(width, i, np.float32), np.array([i])


def block_of(array: np.ndarray) -> object:
    """The reused block (a bytearray) ``array`` lies in; None for ordinary memory."""
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    return base.obj if isinstance(base, memoryview) else None


def check(batch, first: int, width: int) -> None:
    rows, ids = batch
    expected = np.arange(first, first + len(ids))[:, None]
    assert ids.tolist() == expected.tolist()
    assert rows.shape == (len(ids), width)
    assert (rows == expected).all()


def thread_loader(dataset: Rows, num_workers: int) -> fl.DataLoader:
    return fl.DataLoader(dataset, batch_size=4, num_workers=num_workers, worker_method="thread")


@pytest.fixture
def min_block_bytes(monkeypatch):
    """Lower the block threshold to the bytes given."""
    monkeypatch.setattr(buffers, "SMALL_ARRAY_BYTES", -1)  # every array in the block
    return lambda nbytes: monkeypatch.setattr(buffers, "MIN_BLOCK_BYTES", nbytes)


@pytest.mark.timeout(60)
def test_blocks_are_reused_and_a_held_batch_is_never_written_over(min_block_bytes) -> None:
    min_block_bytes(1)
    held, held_from, blocks, ordinary = None, 0, [], 0
    for k, batch in enumerate(thread_loader(Rows(200, small=4096), num_workers=2)):
        check(batch, 4 * k, 4096)
        block = block_of(batch[0])
        assert block_of(batch[1]) is block  # the whole batch in one block
        if block is None:
            ordinary += 1  # a worker's first batch, measured (the workers share what it says)
            continue
        if held is None:
            held, held_from = batch, 4 * k  # kept to the end: its block must not come back
        else:
            assert block is not block_of(held[0])
        blocks.append(id(block))
    assert 1 <= ordinary <= 2  # a first batch measured, the other's too unless it came after
    assert len(set(blocks)) < len(blocks) / 2  # the blocks are reused...
    check(held, held_from, 4096)  # ...and the held batch is still what was loaded


@pytest.mark.timeout(60)
def test_a_batch_that_outgrows_its_block_is_right_and_the_next_block_fits(min_block_bytes) -> None:
    min_block_bytes(1)
    dataset = Rows(24, small=4096, large=16384, large_from=12)
    placed = []  # per batch: (rows in a block, ids in a block)
    for k, batch in enumerate(thread_loader(dataset, num_workers=1)):
        check(batch, 4 * k, 4096 if k < 3 else 16384)
        placed.append((block_of(batch[0]) is not None, block_of(batch[1]) is not None))
    measured, small, partial, large = (False, False), (True, True), (False, True), (True, True)
    assert placed == [measured, small, small, partial, large, large]


@pytest.mark.timeout(60)
def test_batches_that_become_large_later_get_blocks(min_block_bytes) -> None:
    min_block_bytes(200_000)
    small_batches, large_batches = 10, buffers.MEASURE_EVERY + 6
    n, large_from = 4 * (small_batches + large_batches), 4 * small_batches
    dataset = Rows(n, small=1024, large=16384, large_from=large_from)
    in_blocks = []
    for k, batch in enumerate(thread_loader(dataset, num_workers=1)):
        check(batch, 4 * k, 1024 if k < small_batches else 16384)
        in_blocks.append(block_of(batch[0]) is not None)
    assert not any(in_blocks[:small_batches])  # 16 KB batches: below the threshold
    assert all(in_blocks[-5:])  # a large batch was measured: blocks from then on


@pytest.mark.timeout(60)
def test_the_next_epoch_s_threads_reuse_the_last_epoch_s_blocks(min_block_bytes) -> None:
    """persistent_workers=False: new threads each epoch, the same blocks, no batch measured
    again; the loader's blocks are dropped once it loads with processes, and freed with it."""
    min_block_bytes(1)
    loader = thread_loader(Rows(48, small=4096), num_workers=2)
    first = [(block_of(batch[0]), batch[1].ravel().tolist()) for batch in loader]
    blocks = {id(block) for block, _ in first if block is not None}
    del first
    gc.collect()
    # kept for the next epoch: what its pipeline needs (prefetch 2 x 2 workers + 2) at most
    assert min(len(blocks), 6) <= len(loader._thread_blocks.free) <= 6
    second = []
    for k, batch in enumerate(loader):
        check(batch, 4 * k, 4096)
        assert k >= 4 or block_of(batch[0]) is not None  # not measured again
        second.append(id(block_of(batch[0])) in blocks)
        del batch
    # The first batches in the last epoch's blocks: no batch measured again, no block faulted
    # in while old ones are free. The pipeline holds up to six at once (four in flight, two
    # with the loop for a moment), the first epoch may have made fewer, as timing goes, and
    # the two threads take theirs in either order: so a new block may carry any of the first
    # six batches, but most of them are in old ones.
    assert len(blocks) >= 2
    assert sum(second[:6]) >= min(4, len(blocks))
    pool = weakref.ref(loader._thread_blocks)
    loader.worker_method = "multiprocessing"
    assert [b[1].ravel().tolist() for b in loader] == [[*range(i, i + 4)] for i in range(0, 48, 4)]
    assert loader._thread_blocks.nbytes == 0
    del loader
    gc.collect()
    assert pool() is None
