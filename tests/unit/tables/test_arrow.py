"""ArrowDataset: IPC files in both formats, memory-mapped (fixed-size values are views of the
map), a `datasets` save_to_disk folder read as it is, and clear errors."""

from __future__ import annotations

import json
import pickle

import pytest

pytest.importorskip("pyarrow", reason="needs pyarrow (pip install 'flowloader[tables]')")

import pyarrow as pa

from flowloader.tables import ArrowDataset

from .conftest import assert_row, table


def write_ipc(path, data: pa.Table, stream: bool, rows_per_batch: int = 128) -> None:
    with pa.OSFile(str(path), "wb") as sink:
        opener = pa.ipc.new_stream if stream else pa.ipc.new_file
        with opener(sink, data.schema) as writer:
            for batch in data.to_batches(max_chunksize=rows_per_batch):
                writer.write_batch(batch)


@pytest.mark.parametrize("stream", [False, True], ids=["file format", "stream format"])
def test_rows_of_either_format(tmp_path, stream) -> None:
    write_ipc(tmp_path / "t.arrow", table(1000), stream)
    ds = ArrowDataset(tmp_path / "t.arrow")
    assert len(ds) == 1000
    assert ds.block_sizes() == [128] * 7 + [104]
    for i in (0, 127, 128, 999):
        assert_row(ds[i], i)
    rows = ds.__getitems__([900, 2, 3, 4, 130])
    assert [int(r["id"]) for r in rows] == [900, 2, 3, 4, 130]


def test_fixed_size_values_view_the_map(tmp_path) -> None:
    write_ipc(tmp_path / "t.arrow", table(300), stream=False)
    row = ArrowDataset(tmp_path / "t.arrow", columns=["vec"])[5]
    assert not row["vec"].flags.owndata
    assert not row["vec"].flags.writeable
    assert row["vec"].tolist() == [5.0, -5.0]


def test_a_save_to_disk_folder_in_its_state_order(tmp_path) -> None:
    """The layout `datasets` writes: stream-format shards named in state.json."""
    folder = tmp_path / "saved"
    folder.mkdir()
    write_ipc(folder / "data-00001-of-00002.arrow", table(200, offset=300), stream=True)
    write_ipc(folder / "data-00000-of-00002.arrow", table(300), stream=True)
    state = {
        "_data_files": [
            {"filename": "data-00000-of-00002.arrow"},
            {"filename": "data-00001-of-00002.arrow"},
        ],
        "_split": "train",
    }
    (folder / "state.json").write_text(json.dumps(state))
    (folder / "dataset_info.json").write_text("{}")
    ds = ArrowDataset(folder)
    assert len(ds) == 500
    assert [int(ds[i]["id"]) for i in (0, 299, 300, 499)] == [0, 299, 300, 499]
    assert_row(pickle.loads(pickle.dumps(ds))[450], 450)


def test_a_datasetdict_folder_asks_for_a_split(tmp_path) -> None:
    (tmp_path / "train").mkdir()
    (tmp_path / "dataset_dict.json").write_text('{"splits": ["train"]}')
    with pytest.raises(ValueError, match=r"is a DatasetDict .* pass one split's folder"):
        ArrowDataset(tmp_path)


def test_what_datasets_itself_saved(tmp_path) -> None:
    datasets = pytest.importorskip("datasets")
    saved = datasets.Dataset.from_dict({"x": list(range(50)), "t": ["a"] * 50})
    saved.save_to_disk(str(tmp_path / "hf"))
    ds = ArrowDataset(tmp_path / "hf")
    assert [int(ds[i]["x"]) for i in range(50)] == list(range(50))


def test_bad_files_are_named(tmp_path) -> None:
    (tmp_path / "bad.arrow").write_bytes(b"definitely not arrow")
    with pytest.raises(ValueError, match=r"bad\.arrow is not a readable Arrow IPC file"):
        ArrowDataset(tmp_path / "bad.arrow")
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        ArrowDataset(tmp_path / "nothing.arrow")
    write_ipc(tmp_path / "a.arrow", table(10), stream=False)
    write_ipc(tmp_path / "b.arrow", table(10).drop_columns(["blob"]), stream=False)
    with pytest.raises(ValueError, match=r"b\.arrow: its schema differs from the first file's"):
        ArrowDataset([tmp_path / "a.arrow", tmp_path / "b.arrow"])
    with pytest.raises(ValueError, match=r"no column \['label'\]"):
        ArrowDataset(tmp_path / "a.arrow", columns=["label"])
