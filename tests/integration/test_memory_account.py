"""One account of the loader's memory (review F11): the segments this process maps once their
files are unlinked are in its ledger, checked against what the kernel says it maps
(smaps_rollup); stats().memory shows the parts; the batches the loop keeps are reported
beside the loader's memory, with one warning when they alone pass the budget."""

from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest

import flowloader as fl
from flowloader._ipc.batch_codec import mapped_bytes
from flowloader._iter import memory
from flowloader.errors import MemoryBudgetError

MB = 1 << 20
PAGE = 4096


class Megabytes(fl.Dataset):
    """Item i: ``mb`` MB filled with i % 251."""

    def __init__(self, n: int, mb: int = 1) -> None:
        self.n, self.mb = n, mb

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> np.ndarray:
        return np.full(self.mb * MB, i % 251, dtype=np.uint8)


def own_shmem() -> int:
    """The shared memory this process maps (smaps_rollup's Rss for shared memory)."""
    with open("/proc/self/smaps_rollup") as rollup:
        fields = dict(line.split(":", 1) for line in rollup if ":" in line)
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssShmem:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no RssShmem in /proc/self/status ({sorted(fields)})")


@pytest.mark.timeout(120)
def test_the_ledger_of_mapped_segments_agrees_with_smaps_rollup() -> None:
    loader = fl.DataLoader(Megabytes(24), batch_size=2, num_workers=2, persistent_workers=True)
    before = own_shmem()
    iterator = iter(loader)
    try:
        held = []
        for batch in iterator:  # the loop reads every page of each batch, and keeps it
            assert int(batch[:, ::PAGE].sum()) >= 0
            held.append(batch)
        ledger = mapped_bytes(iterator._transport.group.prefix, in_flight=0)
        grown = own_shmem() - before
    finally:
        iterator.shutdown()
    assert ledger.held_batches == 12
    assert ledger.held >= 12 * 2 * MB
    # The kernel's count of the pages this process maps has grown by the ledger's, to a page
    # a segment (the ledger counts bytes, the kernel pages)
    assert abs(grown - (ledger.held + ledger.other)) <= 12 * PAGE, (grown, ledger)


@pytest.mark.timeout(120)
def test_stats_memory_shows_the_parts_and_the_loop_s_batches_beside_them(monkeypatch) -> None:
    monkeypatch.setattr(memory, "CHECK_EVERY_S", 0.0)
    loader = fl.DataLoader(
        Megabytes(32, mb=2),
        batch_size=2,
        num_workers=2,
        persistent_workers=True,
        memory_budget=40 * MB,  # 4 MB batches: the loop keeps 64 MB of them
    )
    iterator = iter(loader)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            held = list(iterator)
        report = iterator.stats().memory
        said = [str(w.message) for w in caught if "the loop keeps" in str(w.message)]
        del held
        gc.collect()
    finally:
        iterator.shutdown()
    assert len(said) == 1, said
    assert "more than the whole budget" in said[0]
    assert "memory_budget=40.0 MB" in said[0]
    assert set(report) >= {"budget", "peak", "workers_bytes", "batches_bytes", "loop_bytes"}
    assert report["loop_batches"] >= 14  # all 16 kept, less those in flight at the last check
    assert report["loop_bytes"] >= report["loop_batches"] * 4 * MB
    # the loader's own memory does not hold the loop's: what is in flight and pooled
    assert report["batches_bytes"] <= 6 * 5 * MB


@pytest.mark.timeout(60)
def test_a_budget_below_one_batch_is_an_error_before_any_worker_starts(tmp_path) -> None:
    started = tmp_path / "started"
    loader = fl.DataLoader(
        Megabytes(8, mb=2),
        batch_size=2,
        num_workers=2,
        memory_budget=3 * MB,
        worker_init_fn=lambda _: started.write_text("x"),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no other warning first
        with pytest.raises(MemoryBudgetError, match="cannot hold one batch"):
            list(loader)
    assert not started.exists()
