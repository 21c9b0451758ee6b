"""ParquetDataset: rows and values, batches read row group by row group with column
projection and a bounded cache, sources of every kind, and a clear error for bad input."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

pytest.importorskip("pyarrow", reason="needs pyarrow (pip install 'flowloader[tables]')")

import pyarrow as pa
import pyarrow.parquet as pq

from flowloader.tables import ParquetDataset

from .conftest import assert_row, table


def test_rows_and_values(parquet_folder) -> None:
    ds = ParquetDataset(parquet_folder)
    assert len(ds) == 1000
    assert ds.block_sizes() == [100] * 10
    assert ds.column_names == ["id", "score", "text", "tokens", "vec", "maybe", "blob"]
    assert ds.schema.field("vec").type == pa.list_(pa.float32(), 2)
    for i in (0, 7, 99, 100, 599, 600, 999):
        assert_row(ds[i], i)
    assert_row(ds[-1], 999)


def test_a_batch_comes_in_the_order_asked_reading_each_row_group_once(parquet_folder) -> None:
    ds = ParquetDataset(parquet_folder)
    indices = [999, 3, 650, 4, 5, 6, 101, 998]
    rows = ds.__getitems__(indices)
    for row, i in zip(rows, indices, strict=True):
        assert_row(row, i)
    assert ds.decoded_blocks == 4  # groups 0, 1, 6 and 9
    ds.__getitems__([7, 650])
    assert ds.decoded_blocks == 4  # from the cache


def test_only_the_selected_columns_are_read(parquet_folder) -> None:
    ds = ParquetDataset(parquet_folder, columns=["text", "id"])
    assert ds[5] == {"text": "row 5", "id": 5}
    assert ds._read_block(0).column_names == ["text", "id"]


def one_group_charge(folder) -> int:
    """What the cache counts one row group of the test table as."""
    ds = ParquetDataset(folder)
    ds[0]
    return ds._cache.bytes


def test_the_cache_is_bounded_in_bytes(parquet_folder) -> None:
    one_group = one_group_charge(parquet_folder)
    ds = ParquetDataset(parquet_folder, cache_bytes=int(2.5 * one_group))
    for i in range(0, 1000, 100):
        ds[i]
    assert len(ds._cache) == 2
    assert ds._cache.bytes <= 2.5 * one_group
    ds[0]
    assert ds.decoded_blocks == 11  # evicted, read again


def read_in_batches(ds: ParquetDataset, order: np.ndarray) -> None:
    for s in range(0, len(order), 64):
        ds.__getitems__(order[s : s + 64])


def test_a_table_that_fits_the_cache_is_joined_into_one_array_per_column(parquet_folder) -> None:
    """Once every row group is cached, a shuffled batch is one gather per column; the rows
    are the same, nothing is read again, and a table the cache cannot hold is never joined."""
    ds = ParquetDataset(parquet_folder)
    order = np.random.default_rng(0).permutation(1000)
    first = [ds.__getitems__(order[s : s + 64]) for s in range(0, 1000, 64)]
    assert ds._cache.whole is not None
    assert not ds._cache
    assert ds.decoded_blocks == 10
    again = [ds.__getitems__(order[s : s + 64]) for s in range(0, 1000, 64)]
    assert ds.decoded_blocks == 10
    for rows in (first, again):
        for row, i in zip([r for batch in rows for r in batch], order, strict=True):
            assert_row(row, int(i))
    assert_row(ds[999], 999)
    small = ParquetDataset(parquet_folder, cache_bytes=int(2.5 * one_group_charge(parquet_folder)))
    read_in_batches(small, order)
    assert small._cache.whole is None


def test_it_pickles_without_its_cache(parquet_folder) -> None:
    ds = ParquetDataset(parquet_folder)
    ds[0]
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.decoded_blocks == 0
    assert len(copy._cache) == 0
    assert_row(copy[450], 450)


def test_sources_a_file_a_list_a_glob(parquet_folder) -> None:
    first, second = sorted(str(p) for p in parquet_folder.glob("*.parquet"))
    assert len(ParquetDataset(first)) == 600
    assert len(ParquetDataset([second, first])) == 1000
    assert ParquetDataset([second, first])[0]["id"] == 600
    assert len(ParquetDataset(str(parquet_folder / "part-*.parquet"))) == 1000


def test_a_footer_alone_gives_the_length(tmp_path) -> None:
    """Opening reads footers only: a file whose data pages are damaged still opens."""
    path = tmp_path / "t.parquet"
    pq.write_table(table(300), path, row_group_size=100)
    data = bytearray(path.read_bytes())
    data[10:200] = bytes(190)  # inside the first row group's pages
    path.write_bytes(bytes(data))
    ds = ParquetDataset(path)
    assert len(ds) == 300
    with pytest.raises(OSError, match=r"t\.parquet: cannot read row group 0"):
        ds[0]


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda d: d / "missing.parquet", FileNotFoundError, "missing.parquet: no such file"),
        (lambda d: _text_file(d), ValueError, "notes.parquet is not a readable Parquet file"),
        (lambda d: _truncated(d), ValueError, "cut.parquet is not a readable Parquet file"),
        (lambda d: _empty_folder(d), FileNotFoundError, "no .parquet or .parq files there"),
    ],
)
def test_bad_sources_name_the_file(tmp_path, make, error, message) -> None:
    with pytest.raises(error, match=message):
        ParquetDataset(make(tmp_path))


def test_a_missing_column_lists_those_there_are(parquet_folder) -> None:
    with pytest.raises(ValueError, match=r"no column \['label'\]; the table's columns are"):
        ParquetDataset(parquet_folder, columns=["id", "label"])


def test_files_with_different_schemas_are_refused(tmp_path) -> None:
    pq.write_table(table(10), tmp_path / "a.parquet")
    pq.write_table(
        table(10).set_column(0, "id", pa.array([str(i) for i in range(10)])), tmp_path / "b.parquet"
    )
    with pytest.raises(ValueError, match=r"b\.parquet: column 'id' is string, but int64"):
        ParquetDataset(tmp_path)
    assert len(ParquetDataset(tmp_path, columns=["text"])) == 20  # the columns asked agree


def test_an_index_out_of_range(parquet_folder) -> None:
    ds = ParquetDataset(parquet_folder)
    with pytest.raises(IndexError, match="index 1000 is out of range for a table of 1000 rows"):
        ds.__getitems__([3, 1000])


def test_nothing_stays_open(parquet_folder) -> None:
    before = set(os.listdir("/proc/self/fd"))
    ds = ParquetDataset(parquet_folder)
    ds.__getitems__(list(range(0, 1000, 37)))
    with pytest.raises(FileNotFoundError):
        ParquetDataset([str(parquet_folder / "part-0.parquet"), "/no/such.parquet"])
    assert set(os.listdir("/proc/self/fd")) <= before | {str(n) for n in range(3)}


def test_a_null_that_cannot_be_stacked_names_the_column(parquet_folder) -> None:
    import flowloader as fl

    loader = fl.DataLoader(ParquetDataset(parquet_folder, columns=["maybe"]), batch_size=8)
    with pytest.raises(
        TypeError, match=r"batch elements \[0, 7\] are None .* \(in sample\[.maybe.\]\)"
    ):
        next(iter(loader))


def _text_file(folder):
    path = folder / "notes.parquet"
    path.write_text("not a table")
    return path


def _truncated(folder):
    path = folder / "cut.parquet"
    pq.write_table(table(50), path)
    path.write_bytes(path.read_bytes()[:-30])
    return path


def _empty_folder(folder):
    (folder / "empty").mkdir()
    return folder / "empty"


def test_a_row_of_only_nulls_and_numbers_as_numpy(tmp_path) -> None:
    pq.write_table(pa.table({"x": pa.array([None, None], pa.float64())}), tmp_path / "n.parquet")
    ds = ParquetDataset(tmp_path / "n.parquet")
    assert ds[0] == {"x": None}
    assert isinstance(ParquetDataset(tmp_path / "n.parquet").schema, pa.Schema)
    assert np.dtype(np.float64) == pa.float64().to_pandas_dtype()


def corrupt_row_group(path, group: int) -> None:
    """Scramble row group ``group``'s column chunks in place, footer untouched."""
    meta = pq.ParquetFile(path).metadata.row_group(group)
    first = min(
        meta.column(c).dictionary_page_offset or meta.column(c).data_page_offset
        for c in range(meta.num_columns)
    )
    data = bytearray(path.read_bytes())
    for k in range(first + 8, first + meta.total_byte_size // 2):
        data[k] ^= 0x5A
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("workers", [0, 2])
def test_skip_errors_drops_the_rows_of_a_corrupt_row_group_alone(tmp_path, workers) -> None:
    import flowloader as fl

    path = tmp_path / "t.parquet"
    pq.write_table(table(400), path, row_group_size=100)
    corrupt_row_group(path, 2)
    ds = ParquetDataset(path, columns=["id", "text"])
    with pytest.raises(OSError, match=r"t\.parquet: cannot read row group 2"):
        ds[250]
    loader = fl.DataLoader(
        ds, batch_size=30, shuffle=True, generator=5, num_workers=workers, skip_errors=OSError
    )
    iterator = iter(loader)
    with pytest.warns(fl.errors.SkippedSampleWarning, match="row group 2"):
        seen = [int(i) for batch in iterator for i in batch["id"]]
    assert sorted(seen) == [*range(200), *range(300, 400)]
    assert sorted(skip.index for skip in iterator.stats().skipped) == list(range(200, 300))


def test_a_corrupt_row_group_is_read_once_per_process(tmp_path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(table(400), path, row_group_size=100)
    corrupt_row_group(path, 1)
    ds = ParquetDataset(path)
    reads = []
    read_block = ds._read_block
    ds._read_block = lambda block: reads.append(block) or read_block(block)
    for index in (150, 120, 199):
        with pytest.raises(OSError, match="row group 1") as raised:
            ds[index]
        assert isinstance(raised.value.__cause__, OSError)  # pyarrow's own words kept
    assert reads == [1]
    assert ds[0]["id"] == 0
    assert ds[399]["id"] == 399


def test_a_run_of_rows_is_a_slice_of_its_row_group_or_slices_joined(parquet_folder) -> None:
    """In sequence a batch inside one row group views the cached block (no gather, no copy);
    one across row groups joins the slices; the rows are those asked either way."""
    from flowloader.collate import default_collate

    ds = ParquetDataset(parquet_folder, columns=["id", "score", "text", "tokens", "vec"])
    for start, stop in [(10, 60), (0, 100), (90, 130), (80, 330), (995, 1000)]:
        got = ds.__getitems__(range(start, stop))
        rows = [got[k] for k in range(stop - start)]
        for row, i in zip(rows, range(start, stop), strict=True):
            assert row["id"] == i
            assert row["text"] == f"row {i}"
            assert row["tokens"].tolist() == list(range(i % 4))
            assert row["vec"].tolist() == [float(i), -float(i)]
        block = ds._cache._blocks[start // 100]
        inside = start // 100 == (stop - 1) // 100
        assert np.shares_memory(got.columns[0], block["id"]) == inside
    one = ParquetDataset(parquet_folder, columns=["id", "vec"]).__getitems__(range(3, 9))
    assert default_collate(one)["vec"].shape == (6, 2)
    whole = ParquetDataset(parquet_folder, columns=["id"])
    whole.__getitems__(np.random.default_rng(1).permutation(1000))
    assert whole._cache.whole is not None
    run = whole.__getitems__(range(250, 700))
    assert np.shares_memory(run.columns[0], whole._cache.whole["id"])
    assert run.columns[0].tolist() == list(range(250, 700))


def test_a_batch_across_row_groups_converted_differently(tmp_path) -> None:
    """A column with nulls in one row group only (objects there, numbers in the other):
    each row keeps its value, in the order asked."""
    values = [*range(100), *[None if i % 3 == 0 else i for i in range(100, 200)]]
    pq.write_table(
        pa.table({"v": pa.array(values, pa.int64())}), tmp_path / "m.parquet", row_group_size=100
    )
    ds = ParquetDataset(tmp_path / "m.parquet")
    asked = [150, 3, 102, 99, 101, 0, 198]
    assert [row["v"] for row in ds.__getitems__(asked)] == [values[i] for i in asked]
    assert [row["v"] for row in ds.__getitems__([5, 2, 7])] == [5, 2, 7]
