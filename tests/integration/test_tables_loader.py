"""Tables through the loader: the same batches for any worker count and method, each row
group decoded once per epoch under BlockShuffleSampler, and a `datasets.Dataset` as a
source. (Remote tables: tests/unit/tables/test_remote_tables.py; fsspec keeps an event loop
thread for the process, which this folder's descriptor check would count.)"""

from __future__ import annotations

import numpy as np
import pytest

import flowloader as fl

pq = pytest.importorskip(
    "pyarrow.parquet", reason="needs pyarrow (pip install 'flowloader[tables]')"
)
from flowloader.tables import ParquetDataset  # noqa: E402

from ..unit.tables.conftest import write_parquet_file  # noqa: E402

COLUMNS = ["id", "score", "text", "vec"]  # what default_collate stacks (tokens are ragged)


@pytest.fixture
def parquet_file(tmp_path):
    return write_parquet_file(tmp_path)


def epoch(loader) -> list:
    return [(b["id"].tolist(), b["text"], b["vec"].tolist()) for b in loader]


def test_the_same_batches_for_any_workers_and_method(parquet_file) -> None:
    ds = ParquetDataset(parquet_file, columns=COLUMNS)

    def run(**options) -> list:
        sampler = fl.BlockShuffleSampler(ds, window=3, seed=4)
        loader = fl.DataLoader(ds, batch_size=32, sampler=sampler, **options)
        return epoch(loader) + epoch(loader)

    expected = run()
    assert sorted(i for ids, _, _ in expected[: len(expected) // 2] for i in ids) == list(
        range(1200)
    )
    assert run(num_workers=2) == expected
    assert run(num_workers=3, worker_method="thread") == expected
    shuffled = fl.DataLoader(ds, batch_size=50, shuffle=True, generator=1)
    assert epoch(fl.DataLoader(ds, batch_size=50, shuffle=True, generator=1, num_workers=2)) == (
        epoch(shuffled)
    )


def test_block_shuffle_decodes_each_row_group_once_per_epoch(parquet_file) -> None:
    ds = ParquetDataset(parquet_file, columns=COLUMNS, cache_bytes=4 * (1 << 20))
    loader = fl.DataLoader(ds, batch_size=32, sampler=fl.BlockShuffleSampler(ds, window=4))
    for count in (1, 2):
        epoch(loader)
        assert ds.decoded_blocks <= 12 * count + 4  # the window left in the cache, at most


def test_a_datasets_dataset_is_a_source_as_it_is() -> None:
    datasets = pytest.importorskip("datasets")
    hf = datasets.Dataset.from_dict({"x": list(range(100)), "y": [i * 2.0 for i in range(100)]})
    loader = fl.DataLoader(hf, batch_size=10, shuffle=True, generator=0, num_workers=2)
    batches = list(loader)
    assert sorted(int(x) for b in batches for x in b["x"]) == list(range(100))
    assert all(np.array_equal(b["y"], b["x"] * 2.0) for b in batches)
