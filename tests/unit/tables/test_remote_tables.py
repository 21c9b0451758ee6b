"""Parquet where users keep it: on S3 (moto's server on loopback, through fsspec/s3fs) and
over HTTP (a server on loopback with byte ranges), reading only the selected columns."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("pyarrow", reason="needs pyarrow (pip install 'flowloader[tables]')")

import pyarrow.parquet as pq

import flowloader as fl
from flowloader.tables import ParquetDataset

from ...shard_server import ShardServer, local_s3_server
from .conftest import assert_row, table


def test_parquet_on_s3_through_fsspec(parquet_file) -> None:
    import s3fs

    with local_s3_server() as endpoint:
        options = {"key": "k", "secret": "s", "client_kwargs": {"endpoint_url": endpoint}}
        fs = s3fs.S3FileSystem(**options)
        fs.mkdir("tables")
        fs.put(str(parquet_file), "tables/train/rows.parquet")
        ds = ParquetDataset("s3://tables/train/", storage_options=options)
        assert len(ds) == 1200
        assert_row(ds[1111], 1111)
        loader = fl.DataLoader(ds, batch_size=64, columns=None) if False else None
        del loader
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
