"""Remote shards over a real HTTP server on 127.0.0.1 and a real S3-compatible server (moto):
whole-shard caching, byte ranges, retries, and errors that name the URL."""

from __future__ import annotations

import multiprocessing
import os
import urllib.request

import pytest

from flowloader.shards import RemoteShardError, ShardCache, ShardedDataset, write_shards
from flowloader.shards.tar_index import INDEX_SUFFIX

from ...shard_server import ShardServer, local_s3_server
from .conftest import numbered_samples


@pytest.fixture
def served(shards, tmp_path):
    with ShardServer(str(tmp_path)) as server:
        yield server, [server.url(os.path.basename(s)) for s in shards]


def keys(ds) -> list[str]:
    return [ds[i]["__key__"] for i in range(len(ds))]


def expected_keys(count: int = 35) -> list[str]:
    return [f"sample{i:05d}" for i in range(count)]


def test_http_shards_are_fetched_once_into_the_cache(served, tmp_path) -> None:
    server, urls = served
    ds = ShardedDataset(urls, cache_dir=str(tmp_path / "cache"))
    assert len(ds) == 35
    assert keys(ds) == expected_keys()
    assert keys(ds) == expected_keys()
    assert all(server.gets[os.path.basename(u)] == 1 for u in urls)  # each shard once
    assert ds[9]["__url__"] == urls[1]


def test_byte_ranges_read_one_sample_per_request(served, tmp_path) -> None:
    server, urls = served
    ds = ShardedDataset(urls, cache_dir=str(tmp_path / "cache"), remote_reads="range")
    assert ds[10]["txt"] == b"text 10"
    assert sum(server.ranges.values()) == 1
    assert sum(server.gets[os.path.basename(u)] for u in urls) == 0  # indexes came as sidecars


def test_without_a_sidecar_the_shard_is_fetched_and_scanned(served, tmp_path) -> None:
    server, urls = served
    os.unlink(tmp_path / ("part-001.tar" + INDEX_SUFFIX))
    ds = ShardedDataset(urls[1:2], cache_dir=str(tmp_path / "cache"))
    assert keys(ds) == expected_keys(16)[8:]
    assert server.gets["part-001.tar"] == 1


def test_a_connection_dropped_mid_shard_is_retried(served, tmp_path) -> None:
    server, urls = served
    server.drop_next["part-002.tar"] = 2
    ds = ShardedDataset(urls, cache_dir=str(tmp_path / "cache"))
    assert ds[17]["txt"] == b"text 17"
    assert server.gets["part-002.tar"] == 3


def test_a_missing_shard_names_its_url(served, tmp_path) -> None:
    server, _ = served
    missing = server.url("part-999.tar")
    with pytest.raises(FileNotFoundError, match=r"part-999\.tar"):
        ShardedDataset([missing], cache_dir=str(tmp_path / "cache"))


def test_a_truncated_shard_is_never_a_wrong_sample(served, tmp_path) -> None:
    server, urls = served
    server.truncate["part-003.tar"] = 2000
    ds = ShardedDataset(urls, cache_dir=str(tmp_path / "cache"))
    with pytest.raises(RemoteShardError, match=r"part-003\.tar"):
        ds[25]
    assert not os.listdir(tmp_path / "cache") or all(
        not name.endswith(".partial") for name in os.listdir(tmp_path / "cache")
    )
    del server.truncate["part-003.tar"]  # the server recovers: the next read succeeds
    assert ds[25]["txt"] == b"text 25"


def test_a_corrupt_cached_shard_is_fetched_again(served, tmp_path) -> None:
    server, urls = served
    ds = ShardedDataset(urls, cache_dir=str(tmp_path / "cache"))
    ds[0]
    cached = ds.cache.local_name(urls[0])
    with open(cached, "r+b") as stream:
        stream.truncate(100)
    fresh = ShardedDataset(urls, cache_dir=str(tmp_path / "cache"))
    assert fresh[3]["txt"] == b"text 3"
    assert server.gets["part-000.tar"] == 2


def _read_shard(args) -> bytes:
    url, cache_dir = args
    return ShardedDataset([url], cache_dir=cache_dir)[0]["txt"]


def test_concurrent_processes_download_a_shard_once(served, tmp_path) -> None:
    server, urls = served
    server.latency_s = 0.2
    cache_dir = str(tmp_path / "cache")
    with multiprocessing.get_context("fork").Pool(4) as pool:
        results = pool.map(_read_shard, [(urls[0], cache_dir)] * 4, chunksize=1)
    assert results == [b"text 0"] * 4
    assert server.gets["part-000.tar"] == 1


def test_the_cache_keeps_under_its_limit(served, tmp_path) -> None:
    _, urls = served
    limit = 2 * os.path.getsize(tmp_path / "part-000.tar") + 100
    ds = ShardedDataset(urls, cache_dir=str(tmp_path / "cache"), cache_limit_bytes=limit)
    assert keys(ds) == expected_keys()
    cached = [e for e in os.scandir(tmp_path / "cache") if e.name.endswith(".tar")]
    assert sum(e.stat().st_size for e in cached) <= limit


def test_prefetch_fetches_in_the_background(served, tmp_path) -> None:
    server, urls = served
    cache = ShardCache(str(tmp_path / "cache"))
    cache.prefetch(urls[:3])
    cache._pool.shutdown(wait=True)
    assert all(os.path.exists(cache.local_name(u)) for u in urls[:3])
    assert [server.gets[os.path.basename(u)] for u in urls[:3]] == [1, 1, 1]


@pytest.fixture(scope="module")
def s3():
    with local_s3_server() as endpoint:
        yield {
            "key": "testing",
            "secret": "testing",
            "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
        }


def test_s3_shards_through_fsspec(s3, tmp_path) -> None:
    import s3fs

    endpoint = s3["client_kwargs"]["endpoint_url"]
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/shards", method="PUT"))  # bucket
    fs = s3fs.S3FileSystem(**s3)
    local = write_shards(numbered_samples(12), str(tmp_path / "s3-%d.tar"), max_count=5)
    for path in local:
        fs.put(path, f"shards/{os.path.basename(path)}")
    fs.put(local[0] + INDEX_SUFFIX, f"shards/{os.path.basename(local[0])}{INDEX_SUFFIX}")
    urls = [f"s3://shards/{os.path.basename(p)}" for p in local]
    ds = ShardedDataset(urls, cache_dir=str(tmp_path / "cache"), storage_options=s3)
    assert keys(ds) == expected_keys(12)
    with pytest.raises(FileNotFoundError):
        ShardedDataset(
            ["s3://shards/missing.tar"], cache_dir=str(tmp_path / "c2"), storage_options=s3
        )


def test_an_s3_glob_is_listed_through_fsspec(s3, tmp_path) -> None:
    import s3fs

    endpoint = s3["client_kwargs"]["endpoint_url"]
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/globbed", method="PUT"))
    fs = s3fs.S3FileSystem(**s3)
    local = write_shards(numbered_samples(12), str(tmp_path / "g-%d.tar"), max_count=5)
    for path in reversed(local):  # listed sorted, whatever the upload order
        fs.put(path, f"globbed/{os.path.basename(path)}")
    ds = ShardedDataset("s3://globbed/g-*.tar", cache_dir=str(tmp_path / "c"), storage_options=s3)
    assert ds.urls == [f"s3://globbed/{os.path.basename(p)}" for p in local]
    assert keys(ds) == expected_keys(12)
    with pytest.raises(FileNotFoundError, match=r"s3://globbed/none-\*\.tar"):
        ShardedDataset("s3://globbed/none-*.tar", storage_options=s3)
