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


def test_a_batch_comes_collated_as_default_collate_would_stack_its_rows(parquet_file) -> None:
    """A table hands default_collate its gathered columns; the batch is the one the rows
    would give, value for value and type for type, and other collate_fns see dict rows."""
    from flowloader.batching import CollatedRecords
    from flowloader.collate import default_collate

    ds = ParquetDataset(parquet_file, columns=["id", "score", "text", "vec", "blob"])
    indices = [1100, 3, 3, 650, 101, 0]
    got = ds.__getitems__(indices)
    assert isinstance(got, CollatedRecords)
    rows = [got[k] for k in range(len(indices))]
    assert [row["id"] for row in rows] == indices
    fast, slow = default_collate(got), default_collate(rows)
    assert list(fast) == list(slow) == ["id", "score", "text", "vec", "blob"]
    for name in fast:
        assert type(fast[name]) is type(slow[name]), name
        if isinstance(slow[name], np.ndarray):
            assert fast[name].dtype == slow[name].dtype, name
            np.testing.assert_array_equal(fast[name], slow[name])
        else:
            assert fast[name] == slow[name], name
    nulls = ParquetDataset(parquet_file, columns=["id", "maybe"]).__getitems__([0, 1])
    assert isinstance(nulls, list)  # a null: the rows, for default_collate to name it
    loader = fl.DataLoader(ds, batch_size=4, collate_fn=lambda batch: [r["id"] for r in batch])
    assert next(iter(loader)) == [0, 1, 2, 3]


def test_a_mixture_of_tables(parquet_file, tmp_path) -> None:
    import pyarrow as pa

    from flowloader.tables import ArrowDataset

    from ..unit.tables.conftest import table

    more = table(300, offset=5000)
    with (
        pa.OSFile(str(tmp_path / "more.arrow"), "wb") as sink,
        pa.ipc.new_file(sink, more.schema) as writer,
    ):
        writer.write_table(more, max_chunksize=64)
    parquet = ParquetDataset(parquet_file, columns=COLUMNS)
    arrow = ArrowDataset(str(tmp_path / "more.arrow"), columns=COLUMNS)
    mix = fl.Mixture({"parquet": parquet, "arrow": arrow}, {"parquet": 3, "arrow": 1}, seed=2)

    def run(**options) -> list:
        return epoch(fl.DataLoader(mix, batch_size=40, **options))

    expected = run()
    ids = [i for batch_ids, _, _ in expected for i in batch_ids]
    assert len(ids) == len(mix)
    from_arrow = [i for i in ids if i >= 5000]
    assert len(set(from_arrow)) == len(from_arrow)  # no row twice within a pass
    assert abs(len(from_arrow) / len(ids) - 0.25) < 0.01
    assert run(num_workers=2) == expected
    assert run(num_workers=2, worker_method="thread") == expected
