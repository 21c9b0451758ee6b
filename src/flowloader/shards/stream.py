"""ShardStream: tar shards read front to back, no index and no seeking, as an IterableDataset:
for shards behind a ``pipe:`` command or a stream that cannot seek."""

from __future__ import annotations

import os
import subprocess
import tarfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any, cast

from flowloader.dataset import IterableDataset
from flowloader.sharding import shard_stream

from . import remote
from .tar_index import ShardFormatError, sample_part
from .urls import is_remote, local_path, shard_list


class ShardStream(IterableDataset):
    """The samples of ``urls`` in order, as dicts like :class:`ShardedDataset`'s, through
    ``transform`` when given. A URL may be a path, ``http(s)://``, an fsspec URL, or
    ``pipe:COMMAND`` (the shard is the command's standard output, e.g.
    ``pipe:curl -s https://host/shard-000.tar``; a command that fails is an error naming it).

    Whole shards are split over (rank, DataLoader worker) with
    :func:`flowloader.shard_stream`, so no sample is read twice. In-process
    (``num_workers=0``) a checkpoint records (shard, sample within it) and a resume skips the
    shards already read without opening them, and the samples of the current shard without
    transforming them. With workers the loader resumes a stream by replaying the delivered
    batches, which needs the same ``num_workers``: another one is refused with a ValueError.
    """

    def __init__(
        self,
        urls: str | os.PathLike | Sequence[str],
        transform: Callable[[dict[str, Any]], Any] | None = None,
        *,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self.urls = shard_list(urls, storage_options)
        self.transform = transform
        self.storage_options = storage_options
        self._position = (0, 0)  # (shards finished, samples of the next shard delivered)
        self._resume_from = (0, 0)

    def __iter__(self) -> Iterator[Any]:
        mine = list(shard_stream(self.urls))
        first_shard, skip = self._resume_from
        self._resume_from = (0, 0)
        for number in range(first_shard, len(mine)):
            self._position = (number, 0)
            delivered = 0
            for sample in read_tar_stream(mine[number], self.storage_options):
                delivered += 1
                if delivered <= skip:
                    continue
                self._position = (number, delivered)
                yield self.transform(sample) if self.transform is not None else sample
            skip = 0
            self._position = (number + 1, 0)

    def state_dict(self) -> dict[str, int]:
        shards, samples = self._position
        return {"shards_done": shards, "samples_in_shard": samples}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self._resume_from = (int(state["shards_done"]), int(state["samples_in_shard"]))


@contextmanager
def _opened(url: str, storage_options: dict[str, Any] | None) -> Iterator[IO[bytes]]:
    if url.startswith("pipe:"):
        command = url[len("pipe:") :]
        process = subprocess.Popen(command, shell=True, stdout=subprocess.PIPE)
        assert process.stdout is not None
        failure = f"the shard command {command!r} exited with status {{}}"
        try:
            yield process.stdout
        except Exception as error:
            process.stdout.close()
            if process.wait() != 0:  # the command's failure explains the unreadable stream
                raise OSError(failure.format(process.returncode)) from error
            raise
        process.stdout.close()
        if process.wait() != 0:
            raise OSError(failure.format(process.returncode))
    elif is_remote(url):
        with remote.open_remote(url, storage_options) as stream:
            yield stream
    else:
        path = local_path(url)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"shard not found: {url}")
        with open(path, "rb") as stream:
            yield stream


def read_tar_stream(url: str, storage_options: dict[str, Any] | None = None) -> Iterator[dict]:
    """The samples of one shard read front to back (members grouped by key)."""
    with _opened(url, storage_options) as opened:
        stream = _Tail(opened)
        current: dict[str, Any] | None = None
        try:
            with tarfile.open(fileobj=cast(Any, stream), mode="r|") as archive:
                for member in archive:
                    parts = sample_part(member)
                    if parts is None:
                        continue
                    key, extension = parts
                    if current is not None and current["__key__"] != key:
                        yield current
                        current = None
                    if current is None:
                        current = {"__key__": key, "__url__": url}
                    data = archive.extractfile(member)
                    current[extension] = data.read() if data is not None else b""
                    if len(current[extension]) != member.size:
                        raise ShardFormatError(f"{url} is truncated inside {member.name}")
                end = archive.offset
        except tarfile.TarError as error:
            raise ShardFormatError(f"{url} is not a readable tar stream: {error}") from error
        if not stream.zeros_at(end, 2 * 512):  # tarfile takes a cut-off header for the end
            raise ShardFormatError(f"{url} is truncated: it ends without the tar end blocks")
        if current is not None:
            yield current


class _Tail:
    """A read-only stream that remembers its last bytes, to check how the tar ends."""

    KEEP = 64 * 1024

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream, self.total, self.tail = stream, 0, b""

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.total += len(data)
        self.tail = (self.tail + data)[-self.KEEP :]
        return data

    def zeros_at(self, offset: int, count: int) -> bool:
        """True if the ``count`` bytes at ``offset`` of the whole stream are zeros (read to
        the end first)."""
        while self.read(self.KEEP):
            pass
        start = offset - (self.total - len(self.tail))
        chunk = self.tail[start : start + count] if start >= 0 else b""
        return len(chunk) == count and chunk == bytes(count)
