"""ShardedDataset: WebDataset-format tar shards as a map-style dataset."""

from __future__ import annotations

import bisect
import concurrent.futures
import json
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from flowloader.dataset import Dataset

from . import remote, tar_index
from .cache import ShardCache
from .tar_index import ShardFormatError, ShardIndex
from .urls import is_remote, local_path, shard_list

MAX_OPEN_SHARDS = 64


class ShardedDataset(Dataset[Any]):
    """The samples of one or more tar shards, in shard order: ``len()`` is their number and
    ``ds[i]`` is sample ``i`` as a dict (``__key__``, ``__url__`` (its shard), and one entry
    per extension holding the member's bytes), passed through ``transform`` when given.

    ``urls``: a list of paths or URLs, a local folder (its ``*.tar`` in sorted order, as
    ``flowloader make-shards`` writes them), a glob (``shards/*.tar``; remote ones other than
    http(s) are listed through fsspec), a brace pattern (``shards/train-{0000..0146}.tar``)
    or a ``.txt`` file listing them. Local paths and ``file://`` are read in place; ``http(s)://``
    and any fsspec URL (``s3://``, ``gs://``, ... with fsspec and its backend installed) are
    fetched whole into ``cache_dir`` (``cache_limit_bytes`` caps it, least recently used
    first), or, with ``remote_reads="range"`` over HTTP, read one sample per byte-range
    request; ``storage_options`` go to fsspec (an S3 endpoint, credentials). Each shard's
    index comes from its sidecar ``<shard>.index.json`` when there is one, else from one scan
    of its tar headers (then saved beside a local shard, or in the cache).

    Being map-style, it gets everything the loader does for map-style datasets: batches that
    do not depend on ``num_workers`` and exact mid-epoch resume. Use
    :class:`flowloader.shards.ShardSampler` to read shard by shard.
    """

    def __init__(
        self,
        urls: str | os.PathLike | Sequence[str],
        transform: Callable[[dict[str, Any]], Any] | None = None,
        *,
        cache_dir: str | None = None,
        cache_limit_bytes: int | None = None,
        remote_reads: str = "shard",
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        if remote_reads not in ("shard", "range"):
            raise ValueError(f"remote_reads should be 'shard' or 'range', got {remote_reads!r}")
        self.urls = shard_list(urls, storage_options)
        self.transform = transform
        self.remote_reads = remote_reads
        self.cache = ShardCache(cache_dir, cache_limit_bytes, storage_options=storage_options)
        if any(is_remote(url) for url in self.urls):  # one round trip for all the indexes
            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                self.indices = list(pool.map(self._index_of, self.urls))
        else:
            self.indices = [self._index_of(url) for url in self.urls]
        counts = np.array([len(index) for index in self.indices], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(counts)])
        self._descriptors_open()

    # Where samples are ---------------------------------------------------------------------

    def __len__(self) -> int:
        return int(self.starts[-1])

    def shard_sizes(self) -> list[int]:
        """The number of samples in each shard, in order."""
        return np.diff(self.starts).tolist()

    def locate(self, index: int) -> tuple[int, int]:
        """(shard, sample within it) of sample ``index``."""
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"sample {index} is out of range for {len(self)} samples")
        shard = bisect.bisect_right(self.starts, index) - 1
        return shard, index - int(self.starts[shard])

    def _index_of(self, url: str) -> ShardIndex:
        if not is_remote(url):
            path = local_path(url)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"shard not found: {url}")
            sidecar = path + tar_index.INDEX_SUFFIX
            beside_writable = os.access(os.path.dirname(os.path.abspath(path)), os.W_OK)
            if not os.path.exists(sidecar) and not beside_writable:  # a read-only directory
                os.makedirs(self.cache.directory, exist_ok=True)
                sidecar = self.cache.local_name(path) + tar_index.INDEX_SUFFIX
            return tar_index.load_or_build(path, sidecar, url)
        cached_index = self.cache.local_name(url) + tar_index.INDEX_SUFFIX
        if os.path.exists(cached_index):
            with open(cached_index, encoding="utf-8") as stream:
                return ShardIndex.from_json(json.load(stream), cached_index)
        published = remote.read_small(url + tar_index.INDEX_SUFFIX, self.cache.storage_options)
        if published is not None:
            index = ShardIndex.from_json(json.loads(published), url + tar_index.INDEX_SUFFIX)
        else:  # no sidecar: fetch the shard and scan it once
            path = self.cache.path(url)
            with open(path, "rb") as stream:
                index = tar_index.scan(stream, os.path.getsize(path), url)
        os.makedirs(self.cache.directory, exist_ok=True)
        tar_index.save(index, cached_index)
        return index

    # Reading -------------------------------------------------------------------------------

    def raw(self, index: int) -> dict[str, Any]:
        """Sample ``index`` as stored: {"__key__", "__url__", extension: bytes, ...}."""
        shard, position = self.locate(index)
        key, members = self.indices[shard].samples[position]
        start = min(offset for offset, _ in members.values())
        end = max(offset + size for offset, size in members.values())
        span = self._read(shard, start, end - start)
        sample: dict[str, Any] = {"__key__": key, "__url__": self.urls[shard]}
        for extension, (offset, size) in members.items():
            sample[extension] = span[offset - start : offset - start + size]
        return sample

    def __getitem__(self, index: int) -> Any:
        sample = self.raw(index)
        return self.transform(sample) if self.transform is not None else sample

    def prefetch(self, shards: Sequence[int]) -> None:
        """Start fetching these remote shards into the cache (the sampler calls it ahead)."""
        urls = [self.urls[s] for s in shards if is_remote(self.urls[s])]
        if urls and self.remote_reads == "shard":
            sizes = {self.urls[s]: self.indices[s].shard_bytes for s in shards}
            self.cache.prefetch(urls, sizes)

    def _read(self, shard: int, offset: int, size: int) -> bytes:
        url = self.urls[shard]
        if is_remote(url) and self.remote_reads == "range":
            return remote.read_range(url, offset, size)
        data = os.pread(self._descriptor(shard), size, offset)
        if len(data) != size:
            if is_remote(url):  # the cached copy went bad: fetch it again, once
                self._forget(shard)
                os.unlink(self.cache.local_name(url))
                data = os.pread(self._descriptor(shard), size, offset)
            if len(data) != size:
                raise ShardFormatError(
                    f"{url} is truncated: {size} bytes wanted at offset {offset}, {len(data)} there"
                )
        return data

    def _descriptor(self, shard: int) -> int:
        with self._open_lock:
            fd = self._open.get(shard)
            if fd is not None:
                return fd
        url = self.urls[shard]
        if is_remote(url):
            path = self.cache.path(url, self.indices[shard].shard_bytes)
        else:
            path = local_path(url)
        fd = os.open(path, os.O_RDONLY)
        with self._open_lock:
            if len(self._open) >= MAX_OPEN_SHARDS:
                os.close(self._open.pop(next(iter(self._open))))
            self._open[shard] = fd
        return fd

    def _forget(self, shard: int) -> None:
        with self._open_lock:
            fd = self._open.pop(shard, None)
        if fd is not None:
            os.close(fd)

    def _descriptors_open(self) -> None:
        """No shard open yet; those opened later are closed when this object goes."""
        self._open: dict[int, int] = {}
        self._open_lock = threading.Lock()
        self._closer = weakref.finalize(self, _close_all, self._open)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for own in ("_open", "_open_lock", "_closer"):  # this process's descriptors
            del state[own]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._descriptors_open()

    def __repr__(self) -> str:
        return f"ShardedDataset({len(self)} samples in {len(self.urls)} shards)"


def _close_all(descriptors: dict[int, int]) -> None:
    for fd in descriptors.values():
        os.close(fd)
    descriptors.clear()
