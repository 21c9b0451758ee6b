"""A shuffle the cache cannot hold, said before the epoch: ``cache_warning(sampler)`` gives
the expected block reads and the fix (BlockShuffleSampler, or a larger cache_bytes), once,
for the loader to warn in the main process; reading the table itself warns nowhere."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

pytest.importorskip("pyarrow", reason="needs pyarrow (pip install 'flowloader[tables]')")

import pyarrow as pa
import pyarrow.parquet as pq

import flowloader as fl
from flowloader.tables import ArrowDataset, ParquetDataset

from .test_arrow import write_ipc

GROUPS, GROUP_ROWS = 40, 250


@pytest.fixture
def numbers(tmp_path):
    """10,000 rows (id int64, x float32) in 40 row groups of 250."""
    path = tmp_path / "numbers.parquet"
    n = GROUPS * GROUP_ROWS
    data = pa.table({"id": np.arange(n), "x": np.arange(n, dtype=np.float32)})
    pq.write_table(data, path, row_group_size=GROUP_ROWS)
    return path


def holding(path, groups: int) -> ParquetDataset:
    """The table with a cache that holds ``groups`` row groups."""
    probe = ParquetDataset(path)
    probe[0]
    return ParquetDataset(path, cache_bytes=int((groups + 0.5) * probe.cached_bytes))


def one_rank(ds, **options) -> fl.BlockShuffleSampler:
    return fl.BlockShuffleSampler(ds, num_replicas=1, rank=0, **options)


def estimated(text: str) -> int:
    return int(re.search(r"reads about ([\d,]+) of them", text).group(1).replace(",", ""))


@pytest.mark.parametrize(("cached", "batch"), [(8, 32), (8, 4), (30, 4)])
def test_a_full_shuffle_the_cache_cannot_hold_is_named_with_its_reads(
    numbers, cached, batch
) -> None:
    ds = holding(numbers, cached)
    sampler = fl.RandomSampler(ds, generator=0)
    text = ds.cache_warning(fl.BatchSampler(sampler, batch, drop_last=False))
    assert text is not None
    assert text.startswith(
        "ParquetDataset: RandomSampler over a table of 40 row groups reads about"
    )
    assert f"holds about {cached} row groups of" in text
    assert "flowloader.BlockShuffleSampler(dataset, window=8)" in text
    assert "raise cache_bytes to about" in text
    assert ds.cache_warning(sampler, batch_size=batch) == text  # a sampler and a batch size
    # The estimate is what an epoch then reads (within a quarter: it is a warning's number).
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reading warns nowhere: the loader says it once
        for indices in fl.BatchSampler(sampler, batch, drop_last=False):
            ds.__getitems__(indices)
    assert ds.decoded_blocks == pytest.approx(estimated(text), rel=0.25)
    assert ds.decoded_blocks > 2 * GROUPS


def test_orders_that_keep_to_the_blocks_or_fit_say_nothing(numbers) -> None:
    ds = holding(numbers, 8)
    assert ds.cache_warning(fl.SequentialSampler(ds), batch_size=32) is None
    assert ds.cache_warning(one_rank(ds, window=4), batch_size=32) is None
    assert ds.cache_warning(one_rank(ds, window=4, shuffle=False), batch_size=32) is None
    assert ds.cache_warning(fl.DistributedSampler(ds, 1, 0, shuffle=False), 32) is None
    assert ds.cache_warning(fl.DistributedSampler(ds, 1, 0, shuffle=True), 32) is not None
    fits = holding(numbers, GROUPS)
    assert fits.cache_warning(fl.RandomSampler(fits), batch_size=32) is None
    assert fits.decoded_blocks == 1  # sizing a block read it into the cache, once
    assert fits.cache_warning(fl.RandomSampler(fits), batch_size=32) is None
    assert fits.decoded_blocks == 1  # (thread workers share the cache: no read again)
    one = ParquetDataset(numbers, cache_bytes=1)
    assert one.cache_warning([0, 5, 2], batch_size=2) is None  # a list: not a known order


def test_a_window_bigger_than_the_cache(numbers) -> None:
    ds = holding(numbers, 3)
    sampler = one_rank(ds, window=8, seed=2)
    text = ds.cache_warning(sampler, batch_size=16)
    assert text is not None
    assert "BlockShuffleSampler(window=8) over a table of 40 row groups" in text
    assert "fewer than the window's 8. Lower the window to 3 or raise cache_bytes" in text
    for indices in fl.BatchSampler(sampler, 16, drop_last=False):
        ds.__getitems__(indices)
    assert ds.decoded_blocks == pytest.approx(estimated(text), rel=0.25)


def test_an_arrow_table_says_it_too(tmp_path) -> None:
    data = pa.table({"id": np.arange(4000)})
    write_ipc(tmp_path / "t.arrow", data, stream=False, rows_per_batch=100)
    probe = ArrowDataset(tmp_path / "t.arrow")
    probe[0]
    ds = ArrowDataset(tmp_path / "t.arrow", cache_bytes=4 * probe.cached_bytes)
    text = ds.cache_warning(fl.RandomSampler(ds), batch_size=64)
    assert text is not None
    assert text.startswith("ArrowDataset: RandomSampler over a table of 40 record batches")


@pytest.mark.parametrize("method", ["multiprocessing", "thread"])
def test_the_loader_warns_once_in_the_main_process(numbers, method, capfd) -> None:
    ds = holding(numbers, 8)
    loader = fl.DataLoader(
        ds, batch_size=32, shuffle=True, generator=0, num_workers=2, worker_method=method
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            ids = sorted(i for batch in loader for i in batch["id"].tolist())
            assert ids == list(range(GROUPS * GROUP_ROWS))
    shuffle_warnings = [w for w in caught if "reads about" in str(w.message)]
    assert len(shuffle_warnings) == 1
    assert "BlockShuffleSampler" in str(shuffle_warnings[0].message)
    assert "reads about" not in capfd.readouterr().err  # nothing from the workers
