"""Arrow columns as row values (values.py), list columns above all: each row's values come
from the values behind the array cut at its own offsets, so a null slot that spans values
(legal Arrow, kept by IPC files) or a slice with a nonzero offset hands no row another row's
values, on every table that converts with them (Arrow, Parquet, a `datasets` folder)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow", reason="needs pyarrow (pip install 'flowloader[tables]')")

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from flowloader.tables import ArrowDataset, ParquetDataset
from flowloader.tables.values import numpy_columns

from .test_arrow import write_ipc


def spanning_nulls(kind: type[pa.ListArray] = pa.ListArray) -> pa.Array:
    """[[1, 2], None (over [3, 4]), [5, 6], None (over [7]), [8, 9, 10]]."""
    offset_type = pa.int64() if kind is pa.LargeListArray else pa.int32()
    offsets = pa.array([0, 2, 4, 6, 7, 10], offset_type)
    values = pa.array(np.arange(1, 11), pa.int64())
    mask = pa.array([False, True, False, True, False])
    return kind.from_arrays(offsets, values, mask=mask)


def as_lists(column: np.ndarray) -> list:
    return [None if v is None else np.asarray(v).tolist() for v in column]


@pytest.mark.parametrize("kind", [pa.ListArray, pa.LargeListArray], ids=["list", "large_list"])
def test_a_null_slot_spanning_values_shifts_no_row(kind) -> None:
    array = spanning_nulls(kind)
    got = numpy_columns(pa.table({"t": array}))["t"]
    assert as_lists(got) == array.to_pylist() == [[1, 2], None, [5, 6], None, [8, 9, 10]]
    assert all(v is None or v.dtype == np.int64 for v in got)


@pytest.mark.parametrize("kind", [pa.ListArray, pa.LargeListArray], ids=["list", "large_list"])
@pytest.mark.parametrize(("start", "length"), [(1, 4), (2, 2), (3, 2), (4, 1), (5, 0)])
def test_a_slice_with_a_nonzero_offset(kind, start, length) -> None:
    array = spanning_nulls(kind).slice(start, length)
    assert as_lists(numpy_columns(pa.table({"t": array}))["t"]) == array.to_pylist()


def test_fixed_size_lists_sliced_and_with_nulls() -> None:
    values = pa.array(np.arange(12, dtype=np.float32))
    array = pa.FixedSizeListArray.from_arrays(values, 2, mask=pa.array([False, True] * 3))
    for start in range(6):
        sliced = array.slice(start)
        got = numpy_columns(pa.table({"v": sliced}))["v"]
        assert as_lists(got) == sliced.to_pylist()
    whole = numpy_columns(pa.table({"v": pa.FixedSizeListArray.from_arrays(values, 3)}))["v"]
    assert whole.shape == (4, 3)
    assert whole[1:].tolist() == np.arange(3, 12, dtype=np.float32).reshape(3, 3).tolist()


def test_a_chunked_column_of_slices() -> None:
    array = spanning_nulls()
    chunked = pa.chunked_array([array.slice(1, 2), array.slice(3)])
    got = numpy_columns(pa.table({"t": chunked}))["t"]
    assert as_lists(got) == chunked.to_pylist() == [None, [5, 6], None, [8, 9, 10]]


def test_lists_holding_a_null_value_come_as_arrows_python_lists() -> None:
    array = pa.array([[1, None, 3], [4], None], pa.list_(pa.int32()))
    got = numpy_columns(pa.table({"t": array}))["t"]
    assert list(got) == [[1, None, 3], [4], None]


def test_an_arrow_file_keeps_its_spanning_nulls_and_the_dataset_reads_them(tmp_path) -> None:
    array = spanning_nulls()
    data = pa.table({"id": np.arange(5), "tokens": array})
    write_ipc(tmp_path / "t.arrow", data, stream=False, rows_per_batch=2)  # slices per batch
    ds = ArrowDataset(tmp_path / "t.arrow", columns="tokens")
    assert [None if v is None else v.tolist() for v in ds.__getitems__(range(5))] == (
        array.to_pylist()
    )
    assert ds.lengths.tolist() == [2, 0, 2, 0, 3]
    rows = ArrowDataset(tmp_path / "t.arrow").__getitems__([4, 2, 0])
    assert [(int(r["id"]), r["tokens"].tolist()) for r in rows] == [
        (4, [8, 9, 10]),
        (2, [5, 6]),
        (0, [1, 2]),
    ]


def test_parquet_lists_with_nulls(tmp_path) -> None:
    array = spanning_nulls(pa.LargeListArray)
    pq.write_table(pa.table({"tokens": array}), tmp_path / "t.parquet", row_group_size=2)
    ds = ParquetDataset(tmp_path / "t.parquet", columns="tokens")
    got = [None if v is None else v.tolist() for v in ds.__getitems__([4, 3, 2, 1, 0])]
    assert got == array.to_pylist()[::-1]


def test_a_datasets_folder_with_null_lists(tmp_path) -> None:
    datasets = pytest.importorskip("datasets")
    rows = [[1, 2], None, [3], [], [4, 5, 6]]
    datasets.Dataset.from_dict({"tokens": rows}).save_to_disk(str(tmp_path / "hf"))
    ds = ArrowDataset(tmp_path / "hf", columns="tokens")
    assert [None if v is None else v.tolist() for v in ds.__getitems__(range(5))] == rows


def test_reading_numbers_imports_no_pandas(tmp_path) -> None:
    """A worker reading a table of numbers converts them without pyarrow's to_numpy, which
    imports pandas (0.3-0.8 s at each fresh worker's first batch)."""
    import subprocess
    import sys

    path = tmp_path / "n.parquet"
    data = {
        "id": np.arange(300),
        "x": np.ones(300, np.float32),
        "v": pa.FixedSizeListArray.from_arrays(pa.array(np.zeros(600, np.float64)), 2),
        "t": pa.array([[1, 2]] * 300, pa.list_(pa.int16())),
    }
    pq.write_table(pa.table(data), path, row_group_size=100)
    code = (
        "import sys; from flowloader.tables import ParquetDataset; "
        "from flowloader.collate import default_collate; "
        f"ds = ParquetDataset({str(path)!r}); "
        "b = default_collate(ds.__getitems__(list(range(50, 250)))); "
        "assert b['t'].shape == (200, 2) and b['id'].tolist() == list(range(50, 250)); "
        "print('pandas' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_booleans_and_nulls_from_their_bits_sliced_anywhere() -> None:
    flags = pa.array([True, False, None, True, True, False, None, False, True, True, False])
    ints = pa.array([1, None, 3, 4, None, 6, 7, 8, 9, None, 11], pa.int16())
    plain = pa.array([True, False, True, True, False, False, True, False, True], pa.bool_())
    for start in range(len(flags)):
        got = numpy_columns(pa.table({"f": flags.slice(start), "i": ints.slice(start)}))
        assert list(got["f"]) == flags.slice(start).to_pylist()
        assert list(got["i"]) == ints.slice(start).to_pylist()
    for start in range(len(plain)):
        column = numpy_columns(pa.table({"b": plain.slice(start)}))["b"]
        assert column.dtype == np.bool_
        assert column.tolist() == plain.slice(start).to_pylist()
