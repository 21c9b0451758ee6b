"""Small real tables for flowloader.tables' tests: Parquet files of several row groups and
Arrow IPC files in both formats, with numbers, text, lists, fixed-size lists and nulls."""

from __future__ import annotations

import numpy as np
import pytest

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:  # the core's environment: every test module here skips itself
    pa = pq = None


def table(n: int = 500, offset: int = 0) -> pa.Table:
    ids = np.arange(offset, offset + n)
    return pa.table(
        {
            "id": ids,
            "score": (ids * 0.5).astype(np.float32),
            "text": [f"row {i}" for i in ids],
            "tokens": [list(range(i % 4)) for i in ids],
            "vec": pa.array([[float(i), -float(i)] for i in ids], pa.list_(pa.float32(), 2)),
            "maybe": pa.array([None if i % 7 == 0 else int(i) for i in ids], pa.int32()),
            "blob": [bytes([i % 256]) * 3 for i in ids],
        }
    )


def expected_row(i: int) -> dict:
    return {
        "id": i,
        "score": np.float32(i * 0.5),
        "text": f"row {i}",
        "tokens": list(range(i % 4)),
        "vec": [float(i), -float(i)],
        "maybe": None if i % 7 == 0 else i,
        "blob": bytes([i % 256]) * 3,
    }


def assert_row(row: dict, i: int) -> None:
    expected = expected_row(i)
    assert list(row) == list(expected)
    assert isinstance(row["id"], np.int64)
    assert row["id"] == i
    assert isinstance(row["score"], np.float32)
    assert row["score"] == expected["score"]
    assert row["text"] == expected["text"]
    assert isinstance(row["tokens"], np.ndarray)
    assert row["tokens"].tolist() == expected["tokens"]
    assert row["vec"].dtype == np.float32
    assert row["vec"].tolist() == expected["vec"]
    assert row["maybe"] == expected["maybe"]
    assert row["blob"] == expected["blob"]


@pytest.fixture
def parquet_folder(tmp_path):
    """1,000 rows in two files (600 + 400) of row groups of 100 rows."""
    folder = tmp_path / "table"
    folder.mkdir()
    whole = table(1000)
    pq.write_table(whole.slice(0, 600), folder / "part-0.parquet", row_group_size=100)
    pq.write_table(whole.slice(600), folder / "part-1.parquet", row_group_size=100)
    return folder


def write_parquet_file(folder):
    """1,200 rows in one file of row groups of 100 rows."""
    path = folder / "rows.parquet"
    pq.write_table(table(1200), path, row_group_size=100)
    return path


@pytest.fixture
def parquet_file(tmp_path):
    return write_parquet_file(tmp_path)
