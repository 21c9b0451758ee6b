"""Pools keep what the pipeline needs, end to end (review F12, F15): after an epoch whose
batches the loop kept, the thread workers' blocks and the persistent process workers'
segments are given back as the loop lets go of them, before the next epoch; later epochs
that hold one batch at a time give back what a held epoch made; a given memory_budget keeps the
thread workers' blocks across epochs. The block threshold (32 MiB) is lowered through the
private knob, as in test_thread_blocks.py."""

from __future__ import annotations

import gc
import os
import time

import numpy as np
import pytest

import flowloader as fl
from flowloader._ipc.batch_codec import mapped_bytes
from flowloader._ipc.segment_pool import capacity_for
from flowloader._worker import buffers


class Big(fl.Dataset):
    """256 KiB a sample, 1 MiB a batch of 4."""

    def __len__(self) -> int:
        return 128

    def __getitem__(self, i: int) -> np.ndarray:
        return np.full(1 << 16, i, dtype=np.float32)


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(buffers, "MIN_BLOCK_BYTES", 1 << 16)


def children_shmem() -> int:
    """Shared memory mapped by this process's children (RssShmem of each)."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[1] != str(os.getpid()):
                    continue
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("RssShmem:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def workers_shmem_once_settled(bound: int) -> int:
    """The children's shared memory once it is within ``bound`` (the workers retire what
    the main process unmapped when they read its message), or after 10 s of polling."""
    deadline = time.monotonic() + 10
    while True:
        kept = children_shmem()
        if kept <= bound or time.monotonic() > deadline:
            return kept
        time.sleep(0.05)


# What pools keep after an epoch (a held epoch made 31): worker processes' segments, prefetch
# 2 x 2 workers and the loop's batch; thread workers' blocks one more (the loop holds two
# batches for a moment: the one it lets go of as the next arrives).
KEPT = 2 * 2 + 1
KEPT_BLOCKS = KEPT + 1


def hold_an_epoch(iterator) -> int:
    """Load an epoch keeping every batch, then let them go: the children's shared memory at
    the epoch's end."""
    held = list(iterator)
    peak = children_shmem()
    del held
    gc.collect()
    return peak


def hold_one_epoch_then_two_one_at_a_time(loader: fl.DataLoader) -> None:
    held = list(loader)
    del held
    gc.collect()
    for _ in range(2):
        for batch in loader:
            del batch
    gc.collect()


@pytest.mark.timeout(120)
def test_thread_blocks_of_a_held_epoch_are_given_back(small_blocks) -> None:
    loader = fl.DataLoader(Big(), batch_size=4, num_workers=2, worker_method="thread")
    hold_one_epoch_then_two_one_at_a_time(loader)
    pool = loader._thread_blocks
    assert pool.lent + len(pool.free) <= KEPT_BLOCKS, (pool.lent, len(pool.free))


@pytest.mark.timeout(120)
def test_the_next_epoch_s_threads_give_back_what_a_held_epoch_made(small_blocks) -> None:
    loader = fl.DataLoader(Big(), batch_size=4, num_workers=2, worker_method="thread")
    held = list(loader)
    del held
    gc.collect()
    pool = loader._thread_blocks
    # Between epochs the blocks the loop lets go of are given back beyond what the next
    # epoch's pipeline needs: not kept until that epoch ends.
    assert pool.lent + len(pool.free) <= KEPT_BLOCKS, (pool.lent, len(pool.free))
    for batch in loader:  # new threads (persistent_workers=False): one batch at a time
        del batch
    gc.collect()
    assert pool.lent + len(pool.free) <= KEPT_BLOCKS, (pool.lent, len(pool.free))


@pytest.mark.timeout(120)
def test_persistent_workers_give_back_the_segments_of_a_held_epoch() -> None:
    loader = fl.DataLoader(Big(), batch_size=4, num_workers=2, persistent_workers=True)
    iterator = iter(loader)
    try:
        peak = hold_an_epoch(iterator)
        hold_one_epoch_then_two_one_at_a_time(loader)  # (its first epoch holds little)
        prefix = loader._iterator._transport.group.prefix
        mapped = sum(mapped_bytes(prefix, in_flight=0)[::2])
        kept = workers_shmem_once_settled(KEPT * capacity_for(1 << 20))
    finally:  # a failure leaves no worker behind
        iterator.shutdown()
    assert peak > 16 << 20  # the held epoch: 32 batches of 1.1 MiB segments
    # after the epoch: prefetch 2 per worker and the loop's batch, unmapped here at once and
    # by the workers when they read the message
    assert mapped <= KEPT * capacity_for(1 << 20), mapped >> 20
    assert kept <= KEPT * capacity_for(1 << 20), kept >> 20


@pytest.mark.timeout(120)
def test_persistent_workers_take_back_a_held_epoch_s_segments_before_the_next_epoch() -> None:
    """The loop lets go of an epoch's batches after the epoch's end: their segments go back
    to the workers, which retire them beyond what the next epoch needs, with no next epoch
    begun (no task carries the releases)."""
    loader = fl.DataLoader(Big(), batch_size=4, num_workers=2, persistent_workers=True)
    iterator = iter(loader)
    try:
        peak = hold_an_epoch(iterator)
        kept = workers_shmem_once_settled(KEPT * capacity_for(1 << 20))
        prefix = iterator._transport.group.prefix
        mapped = sum(mapped_bytes(prefix, in_flight=0)[::2])
        shapes = [batch.shape for batch in loader]  # the next epoch runs, on the same workers
        assert shapes == [(4, 1 << 16)] * 32
    finally:  # a failure leaves no worker behind
        iterator.shutdown()
    assert peak > 16 << 20  # the held epoch: 32 batches of 1.1 MiB segments
    assert kept <= KEPT * capacity_for(1 << 20), kept >> 20
    assert mapped <= KEPT * capacity_for(1 << 20), mapped >> 20


@pytest.mark.timeout(120)
def test_a_given_memory_budget_keeps_the_thread_blocks_across_epochs(
    small_blocks, monkeypatch
) -> None:
    made = []
    original = buffers._Block.__init__

    def counting(self, capacity: int) -> None:
        made.append(capacity)
        original(self, capacity)

    monkeypatch.setattr(buffers._Block, "__init__", counting)
    loader = fl.DataLoader(
        Big(), batch_size=4, num_workers=2, worker_method="thread", memory_budget=1 << 30
    )
    per_epoch = []
    for _ in range(4):
        before = len(made)
        for batch in loader:
            del batch
        gc.collect()
        per_epoch.append(len(made) - before)
    # Dropped every epoch, each epoch would make as many blocks as the first ([5, 5, 5, 5]);
    # kept, the later epochs together make fewer than two epochs' worth (how many a
    # moment's demand adds depends on the threads' timing: [5, 0, 1, 3] was seen).
    assert sum(per_epoch[1:]) < 2 * per_epoch[0], per_epoch
