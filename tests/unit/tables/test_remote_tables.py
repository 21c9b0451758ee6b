"""Parquet where users keep it: on S3 (moto's server on loopback, through fsspec/s3fs) and
over HTTP (a server on loopback with byte ranges), reading only the selected columns."""

from __future__ import annotations

import os
import time
from collections import Counter

import numpy as np
import pytest

pytest.importorskip("pyarrow", reason="needs pyarrow (pip install 'flowloader[tables]')")

import pyarrow.parquet as pq

import flowloader as fl
from flowloader.tables import ParquetDataset, blocks

from ...shard_server import ShardServer, local_s3_server
from .conftest import assert_row, table


def test_parquet_on_s3_through_fsspec(parquet_file) -> None:
    s3fs = pytest.importorskip("s3fs")  # the s3 and shards-test extras bring it

    with local_s3_server() as endpoint:
        options = {"key": "k", "secret": "s", "client_kwargs": {"endpoint_url": endpoint}}
        fs = s3fs.S3FileSystem(**options)
        fs.mkdir("tables")
        fs.put(str(parquet_file), "tables/train/rows.parquet")
        ds = ParquetDataset("s3://tables/train/", storage_options=options)
        assert len(ds) == 1200
        assert_row(ds[1111], 1111)
        ids = [
            int(i)
            for b in fl.DataLoader(
                ParquetDataset(
                    "s3://tables/train/*.parquet", columns=["id"], storage_options=options
                ),
                batch_size=300,
            )
            for i in b["id"]
        ]
        assert ids == list(range(1200))
        fs.clear_instance_cache()


def test_parquet_over_http_fetches_only_the_columns_asked(parquet_file) -> None:
    pytest.importorskip("aiohttp")
    payload = [os.urandom(2000) for _ in range(1200)]  # 2.4 MB that must not be fetched
    pq.write_table(
        table(1200).append_column("payload", [payload]), parquet_file, row_group_size=100
    )
    with ShardServer(str(parquet_file.parent)) as server:
        url = server.url("rows.parquet")
        ds = ParquetDataset(url, columns=["id"])
        assert [int(ds[i]["id"]) for i in (0, 555, 1199)] == [0, 555, 1199]
        ids = [int(i) for b in fl.DataLoader(ds, batch_size=100) for i in b["id"]]
        assert ids == list(range(1200))
        assert server.gets["rows.parquet"] == 0  # byte ranges only
        # the footer (Arrow reads its last 64 KiB) and the id column's chunks: 3% of the file
        assert server.bytes_sent["rows.parquet"] < os.path.getsize(parquet_file) / 20


def test_a_remote_row_group_read_is_tried_again_after_a_drop_or_a_503(parquet_file) -> None:
    pytest.importorskip("aiohttp")
    with ShardServer(str(parquet_file.parent)) as server:
        ds = ParquetDataset(server.url("rows.parquet"), columns=["id", "text"])
        server.drop_next["rows.parquet"] = 1  # a connection cut halfway through the body
        assert_row_ids(ds.__getitems__([5, 150, 1100]), [5, 150, 1100])
        server.fail_next["rows.parquet"] = 2  # two 503s, then the answer
        assert_row_ids(ds.__getitems__([350, 351]), [350, 351])
        server.fail_next["rows.parquet"] = 2
        opened = ParquetDataset(server.url("rows.parquet"), columns=["id"])  # the footer too
        assert len(opened) == 1200


def test_a_remote_read_that_keeps_failing_names_the_url_and_row_group(
    parquet_file, monkeypatch
) -> None:
    pytest.importorskip("aiohttp")
    with ShardServer(str(parquet_file.parent)) as server:
        url = server.url("rows.parquet")
        ds = ParquetDataset(url, columns=["id"])
        server.fail_next["rows.parquet"] = 100
        started = time.monotonic()
        with pytest.raises(OSError, match="cannot read row group 7 after 4 attempts") as error:
            ds[777]
        assert str(error.value).startswith(f"{url}: ")
        assert time.monotonic() - started < 10  # 0.2 + 0.4 + 0.8 s of backoff
        assert server.fail_next["rows.parquet"] == 96
        with pytest.raises(OSError, match="row group 7"):  # skip_errors' next rows of it
            ds[701]
        assert server.fail_next["rows.parquet"] == 96  # failed at once, nothing fetched
        with pytest.raises(OSError, match="cannot read its footer after 4 attempts"):
            ParquetDataset(url)
        server.fail_next["rows.parquet"] = 0
        monkeypatch.setattr(blocks, "FAILED_BLOCK_WAIT_S", 0.0)  # the wait is over
        assert int(ds[777]["id"]) == 777  # nothing kept from the failures


def assert_row_ids(rows: list[dict], ids: list[int]) -> None:
    assert [int(row["id"]) for row in rows] == ids
    assert [row["text"] for row in rows] == [f"row {i}" for i in ids]


def test_s3_bytes_per_block_shuffled_epoch_are_the_selected_columns(tmp_path) -> None:
    """An epoch under BlockShuffleSampler with 2 worker processes fetches the selected
    columns' compressed chunks about once (<= 1.2x), and nothing of the others."""
    s3fs = pytest.importorskip("s3fs")

    rows = 20_000
    rng = np.random.default_rng(0)
    payload = [rng.bytes(300) for _ in range(rows)]  # 6 MB never selected
    whole = table(rows).append_column("payload", [payload])
    pq.write_table(whole, tmp_path / "rows.parquet", row_group_size=500)
    footer = pq.ParquetFile(tmp_path / "rows.parquet").metadata
    selected = ["id", "text", "score"]
    chunks = [
        footer.row_group(g).column(c)
        for g in range(footer.num_row_groups)
        for c in range(footer.num_columns)
    ]
    selected_bytes = sum(c.total_compressed_size for c in chunks if c.path_in_schema in selected)
    assert selected_bytes < os.path.getsize(tmp_path / "rows.parquet") / 10
    sent: Counter[str] = Counter()
    with local_s3_server(sent) as endpoint:
        options = {"key": "k", "secret": "s", "client_kwargs": {"endpoint_url": endpoint}}
        fs = s3fs.S3FileSystem(**options)
        fs.mkdir("epochs")  # moto's buckets outlive its server: a name of this test's own
        fs.put(str(tmp_path / "rows.parquet"), "epochs/rows.parquet")
        ds = ParquetDataset("s3://epochs/rows.parquet", selected, storage_options=options)
        sent.clear()  # the epoch alone: the footer was read when the dataset was made
        sampler = fl.BlockShuffleSampler(ds, seed=0)
        loader = fl.DataLoader(ds, batch_size=256, sampler=sampler, num_workers=2)
        ids = np.concatenate([batch["id"] for batch in loader])
        fs.clear_instance_cache()
    assert sorted(ids.tolist()) == list(range(rows))
    fetched = sent["/epochs/rows.parquet"]
    assert selected_bytes <= fetched <= 1.2 * selected_bytes, (fetched, selected_bytes)
