"""Ragged list columns: default_collate names the column and its lengths (not every row),
stacks list columns whose rows agree as before, and PadCollate pads them as torch's
pad_sequence(batch_first=True) does, with their lengths, on every path a batch takes."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyarrow", reason="needs pyarrow (pip install 'flowloader[tables]')")

import pyarrow as pa
import pyarrow.parquet as pq

import flowloader as fl
from flowloader.collate import CollateShapeError, default_collate
from flowloader.tables import PadCollate, ParquetDataset
from flowloader.tables.ragged import RaggedRecords


@pytest.fixture
def token_table(tmp_path):
    """400 rows: id, tokens (row i: i % 5 values i*10, i*10+1, ...), a label, a title."""
    ids = np.arange(400)
    tokens = [[i * 10 + k for k in range(i % 5)] for i in ids]
    data = pa.table(
        {
            "id": ids,
            "tokens": pa.array(tokens, pa.list_(pa.int32())),
            "label": (ids % 3).astype(np.int64),
            "title": [f"t{i}" for i in ids],
        }
    )
    path = tmp_path / "tokens.parquet"
    pq.write_table(data, path, row_group_size=100)
    return path


def expected_tokens(i: int) -> list[int]:
    return [i * 10 + k for k in range(i % 5)]


def test_default_collate_names_the_column_and_the_lengths(token_table) -> None:
    batch = ParquetDataset(token_table).__getitems__(list(range(256)))
    assert isinstance(batch, RaggedRecords)
    with pytest.raises(CollateShapeError) as raised:
        default_collate(batch)
    message = str(raised.value)
    assert isinstance(raised.value, RuntimeError)
    assert "column 'tokens' holds lists of different lengths (0 to 4 values" in message
    assert "a batch of 256 rows" in message
    assert "PadCollate" in message
    assert len(message) < 400


def test_list_columns_of_one_length_stack_as_the_rows_would(token_table) -> None:
    ds = ParquetDataset(token_table, columns=["id", "tokens", "title"])
    indices = [3, 8, 13, 398]  # 3 values each
    batch = ds.__getitems__(indices)
    fast, slow = default_collate(batch), default_collate([batch[k] for k in range(4)])
    assert list(fast) == list(slow) == ["id", "tokens", "title"]
    assert fast["tokens"].dtype == slow["tokens"].dtype == np.int32
    np.testing.assert_array_equal(fast["tokens"], slow["tokens"])
    assert fast["tokens"].tolist() == [expected_tokens(i) for i in indices]
    assert fast["title"] == slow["title"]


@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_collate_pads_a_tables_batch(token_table, side) -> None:
    ds = ParquetDataset(token_table)
    indices = [7, 0, 4, 399, 12]
    out = PadCollate(padding_value=-1, padding_side=side)(ds.__getitems__(indices))
    assert list(out) == ["id", "tokens", "tokens_lengths", "label", "title"]
    assert out["tokens"].dtype == np.int32
    assert out["tokens"].shape == (5, 4)
    assert out["tokens_lengths"].dtype == np.int64
    assert out["tokens_lengths"].tolist() == [i % 5 for i in indices]
    for row, i in zip(out["tokens"].tolist(), indices, strict=True):
        values, pad = expected_tokens(i), [-1] * (4 - i % 5)
        assert row == (values + pad if side == "right" else pad + values)
    assert out["id"].tolist() == indices
    assert out["title"] == [f"t{i}" for i in indices]


def test_pad_to_fixes_the_length_and_a_longer_row_is_named(token_table) -> None:
    ds = ParquetDataset(token_table, columns=["tokens"])
    out = PadCollate(pad_to=6)(ds.__getitems__([0, 1, 2]))
    assert out["tokens"].tolist() == [[0] * 6, [10] + [0] * 5, [20, 21] + [0] * 4]
    with pytest.raises(
        ValueError, match=r"column 'tokens': row 1 of the batch has 4 values, more "
    ):
        PadCollate(pad_to=3)(ds.__getitems__([0, 4, 1]))


def test_the_same_padded_batches_on_every_worker_path(token_table) -> None:
    ds = ParquetDataset(token_table, columns=["id", "tokens"])

    def run(**options) -> list:
        loader = fl.DataLoader(
            ds,
            batch_size=64,
            sampler=fl.BlockShuffleSampler(ds, window=2, seed=3, num_replicas=1, rank=0),
            collate_fn=PadCollate(pad_to=8),
            **options,
        )
        return [
            (b["id"].tolist(), b["tokens"].tolist(), b["tokens_lengths"].tolist()) for b in loader
        ]

    expected = run()
    for ids, tokens, lengths in expected:
        assert lengths == [i % 5 for i in ids]
        assert tokens == [expected_tokens(i) + [0] * (8 - i % 5) for i in ids]
    assert run(num_workers=2) == expected
    assert run(num_workers=2, worker_method="thread") == expected


def test_rows_with_nulls_and_lists_of_the_samples_themselves(tmp_path) -> None:
    data = pa.table(
        {
            "tokens": pa.array([[1, 2], None, [3], []], pa.list_(pa.int64())),
            "maybe": pa.array([1, None, 3, 4], pa.int32()),
        }
    )
    pq.write_table(data, tmp_path / "n.parquet")
    rows = ParquetDataset(tmp_path / "n.parquet").__getitems__([0, 1, 2, 3])
    assert isinstance(rows, list)  # a null: the rows
    out = PadCollate(columns=["tokens"])(rows[::2])
    assert out["tokens"].tolist() == [[1, 2], [3, 0]]
    assert out["maybe"].tolist() == [1, 3]
    with pytest.raises(TypeError, match=r"batch elements \[1\] are None"):
        PadCollate(columns=["tokens"])(rows)  # 'maybe' has a null: default_collate says so
    only = ParquetDataset(tmp_path / "n.parquet", columns="tokens").__getitems__([0, 1, 2, 3])
    padded, lengths = PadCollate()(only)  # a null list is empty
    assert padded.tolist() == [[1, 2], [0, 0], [3, 0], [0, 0]]
    assert padded.dtype == np.int64
    assert lengths.tolist() == [2, 0, 1, 0]


def test_python_lists_and_multi_dimensional_rows() -> None:
    padded, lengths = PadCollate()([[1, 2, 3], [], [4]])
    assert lengths.tolist() == [3, 0, 1]
    assert padded.dtype == np.int64  # an empty list does not make it float
    assert padded.tolist() == [[1, 2, 3], [0, 0, 0], [4, 0, 0]]
    frames = [
        {"x": np.ones((2, 3), np.float32), "y": 1},
        {"x": np.ones((1, 3), np.float32), "y": 2},
    ]
    out = PadCollate(pad_to=3)(frames)
    assert out["x"].shape == (2, 3, 3)
    assert out["x"][1].tolist() == [[1.0] * 3, [0.0] * 3, [0.0] * 3]
    assert out["x_lengths"].tolist() == [2, 1]
    assert out["y"].tolist() == [1, 2]


def test_it_matches_torchs_pad_sequence() -> None:
    torch = pytest.importorskip("torch")
    from torch.nn.utils.rnn import pad_sequence

    rows = [np.arange(n, dtype=np.float32) + 1 for n in (3, 1, 5, 0)]
    for side in ("right", "left"):
        padded, _ = PadCollate(padding_value=-2.0, padding_side=side)(rows)
        theirs = pad_sequence(
            [torch.from_numpy(r) for r in rows],
            batch_first=True,
            padding_value=-2.0,
            padding_side=side,
        )
        np.testing.assert_array_equal(padded, theirs.numpy())


def test_bad_arguments_and_fields_are_named(token_table) -> None:
    with pytest.raises(ValueError, match="pad_to should be a non-negative int, got -1"):
        PadCollate(pad_to=-1)
    with pytest.raises(ValueError, match="padding_side should be 'right' or 'left'"):
        PadCollate(padding_side="middle")
    batch = ParquetDataset(token_table).__getitems__([1, 2])
    with pytest.raises(KeyError, match=r"no field \['text'\] in the batch; it has \['id'"):
        PadCollate(columns="text")(batch)
    with pytest.raises(ValueError, match=r"the lengths of 'tokens' would replace the field 'id'"):
        PadCollate(lengths="id")(batch)
    with pytest.raises(TypeError, match=r"column 'label': row 0 is 1, not a list or array"):
        PadCollate(columns=["label"])([{"label": 1}, {"label": 2}])
    with pytest.raises(TypeError, match=r"names fields of dict samples, but the samples are"):
        PadCollate(columns=["tokens"])([[1], [2]])
    with pytest.raises(ValueError, match="an empty batch"):
        PadCollate()([])
    uneven = [{"x": np.ones((2, 3))}, {"x": np.ones((1, 2))}]
    with pytest.raises(CollateShapeError, match=r"column 'x': rows of shapes \[\(2,\), \(3,\)\]"):
        PadCollate()(uneven)
