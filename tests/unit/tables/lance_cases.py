"""LanceDataset: rows and values as the other tables give them, a batch in one take in the
order asked, the same batches for any workers, a pinned version that a resume checks, and
clear errors. Run in a pytest of their own by test_lance.py: once imported, pylance warns at
every fork of the process, which tests that turn warnings into errors would trip on; pylance
is imported by a fixture, never when this file is imported (the suite's --doctest-modules
imports it)."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

pytest.importorskip("pyarrow", reason="needs pyarrow (pip install 'flowloader[tables]')")

import flowloader as fl
from flowloader.tables import LanceDataset

from .conftest import assert_row, table


@pytest.fixture
def lance():
    """pylance, imported here, not at import: the suite's --doctest-modules imports this file
    in the main pytest process, which must never load pylance."""
    return pytest.importorskip("lance", reason="needs pylance (pip install 'flowloader[lance]')")


@pytest.fixture
def lance_uri(tmp_path, lance):
    """1,000 rows of the test table in fragments of 300 rows."""
    uri = str(tmp_path / "rows.lance")
    lance.write_dataset(table(1000), uri, max_rows_per_file=300)
    return uri


def test_rows_values_and_fragments(lance_uri) -> None:
    ds = LanceDataset(lance_uri)
    assert len(ds) == 1000
    assert ds.block_sizes() == [300, 300, 300, 100]
    assert ds.column_names == ["id", "score", "text", "tokens", "vec", "maybe", "blob"]
    for i in (0, 7, 299, 300, 999, -1):
        assert_row(ds[i], i % 1000)


def test_a_batch_comes_in_the_order_asked(lance_uri) -> None:
    ds = LanceDataset(lance_uri, columns=["text", "id"])
    indices = [999, 3, 650, 3, 0, 301]
    rows = ds.__getitems__(indices)
    assert [row["id"] for row in rows] == indices
    assert rows[0] == {"text": "row 999", "id": 999}
    with pytest.raises(IndexError, match="index 1000 is out of range for a table of 1000 rows"):
        ds.__getitems__([5, 1000])


@pytest.mark.parametrize(("workers", "method"), [(2, "multiprocessing"), (2, "thread")])
def test_the_same_batches_for_any_workers(lance_uri, workers, method) -> None:
    ds = LanceDataset(lance_uri, columns=["id", "score", "vec"])

    def ids(num_workers: int, **options) -> list[list[int]]:
        sampler = fl.BlockShuffleSampler(ds, window=2, seed=3)
        loader = fl.DataLoader(
            ds, batch_size=64, sampler=sampler, num_workers=num_workers, **options
        )
        return [batch["id"].tolist() for batch in loader]

    expected = ids(0)
    assert sorted(i for batch in expected for i in batch) == list(range(1000))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Lance warns when a process forks: none may
        assert ids(workers, worker_method=method) == expected


def test_the_version_is_pinned_and_a_resume_checks_it(lance_uri, lance) -> None:
    ds = LanceDataset(lance_uri, columns=["id"])
    lance.write_dataset(table(50, offset=1000), lance_uri, mode="append")
    assert len(ds) == 1000  # still the version it was opened at
    assert len(pickle.loads(pickle.dumps(ds))) == 1000
    newer = LanceDataset(lance_uri, columns=["id"])
    assert len(newer) == 1050
    assert newer.version == ds.version + 1
    loader = fl.DataLoader(ds, batch_size=100, shuffle=True, generator=1)
    iterator = iter(loader)
    next(iterator)
    state = loader.state_dict()
    moved = fl.DataLoader(newer, batch_size=100, shuffle=True, generator=1)
    with pytest.raises(ValueError, match=r"fragments changed .* open version="):
        moved.load_state_dict(state)
    again = fl.DataLoader(
        LanceDataset(lance_uri, columns=["id"], version=ds.version),
        batch_size=100,
        shuffle=True,
        generator=1,
    )
    again.load_state_dict(state)
    rest = [b["id"].tolist() for b in again]
    assert rest == [b["id"].tolist() for b in iterator]


def test_bad_input_is_named(lance_uri, tmp_path) -> None:
    with pytest.raises(ValueError, match=r"no column \['label'\]; the table's columns are"):
        LanceDataset(lance_uri, columns=["label"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="empty is not a readable Lance dataset"):
        LanceDataset(str(tmp_path / "empty"))


def test_it_pickles_without_the_open_dataset(lance_uri) -> None:
    ds = LanceDataset(lance_uri)
    ds[0]
    copy = pickle.loads(pickle.dumps(ds))
    assert copy._opened is None
    assert_row(copy[555], 555)
    assert np.float32(copy[2]["score"]) == np.float32(1.0)


def test_list_columns_with_nulls_that_span_values(tmp_path, lance) -> None:
    """Each row its own values (R5): Lance's take hands back list arrays whose offsets the
    conversion follows, null slots and all."""
    import pyarrow as pa

    offsets = pa.array([0, 2, 4, 6, 7, 10], pa.int32())
    values = pa.array(np.arange(1, 11), pa.int64())
    mask = pa.array([False, True, False, True, False])
    tokens = pa.ListArray.from_arrays(offsets, values, mask=mask)
    uri = str(tmp_path / "lists.lance")
    lance.write_dataset(pa.table({"id": np.arange(5), "tokens": tokens}), uri)
    rows = LanceDataset(uri).__getitems__([4, 1, 2, 0, 3])
    got = [None if r["tokens"] is None else r["tokens"].tolist() for r in rows]
    assert got == [[8, 9, 10], None, [5, 6], [1, 2], None]
