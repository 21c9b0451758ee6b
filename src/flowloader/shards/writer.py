"""Writing WebDataset-format tar shards, with our index sidecars.

A sample is a dict: ``__key__`` (its name inside the shard) and one entry per extension,
bytes (or str, or a number, written as its text). Members are written in the order the dict
gives, as ``key.extension``, with fixed owner, mode and mtime, so the same samples always give
the same bytes. A shard is written to a temporary name and renamed once complete, with its
index beside it: an interrupted run never leaves a shard that looks finished.
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Iterable
from typing import Any

from . import tar_index

BLOCK = 512


def member_bytes(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value).encode("ascii")
    raise TypeError(f"a shard member must be bytes, str, int or float, got {type(value).__name__}")


def sample_members(sample: dict[str, Any]) -> list[tuple[str, bytes]]:
    """(member name, bytes) of one sample, checked."""
    key = sample.get("__key__")
    if not isinstance(key, str) or not key or "." in os.path.basename(key):
        raise ValueError(f"a sample needs a __key__ without a dot in its file name, got {key!r}")
    members = [
        (f"{key}.{extension}", member_bytes(value))
        for extension, value in sample.items()
        if not extension.startswith("__")
    ]
    if not members:
        raise ValueError(f"sample {key!r} has no members besides its key")
    return members


def tar_size(member_sizes: Iterable[int]) -> int:
    """Bytes a tar of members of these sizes takes before its end blocks (one header block
    each, data padded to a block)."""
    return sum(BLOCK + -(-size // BLOCK) * BLOCK for size in member_sizes)


class ShardWriter:
    """One shard being written to ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.partial = f"{path}.{os.getpid()}.partial"
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.archive = tarfile.open(  # noqa: SIM115 (closed by close() or abandon())
            self.partial, "w", format=tarfile.USTAR_FORMAT
        )
        self.count = 0

    def write(self, members: list[tuple[str, bytes]]) -> None:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o444, 0
            info.uname = info.gname = "flowloader"
            self.archive.addfile(info, io.BytesIO(data))
        self.count += 1

    def close(self) -> tar_index.ShardIndex:
        """Finish the shard: rename it into place and write its index beside it."""
        self.archive.close()
        with open(self.partial, "rb") as stream:
            index = tar_index.scan(stream, os.path.getsize(self.partial), self.path)
        os.replace(self.partial, self.path)
        tar_index.save(index, self.path + tar_index.INDEX_SUFFIX)
        return index

    def abandon(self) -> None:
        self.archive.close()
        if os.path.exists(self.partial):
            os.unlink(self.partial)


class ShardCutter:
    """Where shards end: a new one starts after ``max_count`` samples, or before a sample that
    would take the current one past ``max_size`` bytes (its tar size: headers, padding)."""

    def __init__(self, max_count: int, max_size: int) -> None:
        if max_count < 1 or max_size < 1:
            raise ValueError("max_count and max_size should be positive")
        self.max_count, self.max_size = max_count, max_size
        self.shards = self.count = self.size = 0

    def place(self, needed: int) -> bool:
        """Count a sample of ``needed`` tar bytes; True if it starts a new shard."""
        starts = (
            not self.shards or self.count >= self.max_count or self.size + needed > self.max_size
        )
        if starts:
            self.shards += 1
            self.count = self.size = 0
        self.count += 1
        self.size += needed
        return starts


def write_shards(
    samples: Iterable[dict[str, Any]],
    pattern: str,
    max_count: int = 10_000,
    max_size: int = 3 << 30,
) -> list[str]:
    """Write ``samples`` into shards named ``pattern % shard_number`` (e.g.
    ``"out/train-%06d.tar"``), starting a new shard after ``max_count`` samples or before a
    sample that would take it past ``max_size`` bytes. Returns the shards' paths."""
    if "%" not in pattern:
        raise ValueError(f"pattern needs a %d-style field for the shard number, got {pattern!r}")
    cutter = ShardCutter(max_count, max_size)
    paths: list[str] = []
    writer: ShardWriter | None = None
    try:
        for sample in samples:
            members = sample_members(sample)
            if cutter.place(tar_size(len(data) for _, data in members)):
                if writer is not None:
                    writer.close()
                writer = ShardWriter(pattern % len(paths))
                paths.append(writer.path)
            assert writer is not None
            writer.write(members)
        if writer is not None:
            writer.close()
            writer = None
    finally:
        if writer is not None:
            writer.abandon()
    return paths
