"""Where every sample of a tar shard lies: the byte offset and size of each member, grouped
into samples as WebDataset groups them (consecutive members sharing a key: ``dir/name.jpg``
and ``dir/name.cls`` are sample ``dir/name``'s "jpg" and "cls").

The index is read from a sidecar file (``<shard>.index.json``, written by
:func:`flowloader.shards.write_shards` or by the first scan) when one matches the shard's
size, else built by reading the tar headers once (Python's ``tarfile``: ustar, GNU and pax
headers, as GNU tar and the ``webdataset`` package write them).
"""

from __future__ import annotations

import json
import os
import re
import tarfile
from dataclasses import dataclass
from typing import IO, Any

INDEX_SUFFIX = ".index.json"
FORMAT = "flowloader-tar-index"
VERSION = 1
# WebDataset's split of a member name into key and extension: the extension starts at the
# first dot of the file name.
_KEY_AND_EXTENSION = re.compile(r"^((?:.*/|)[^./]+)\.([^/]*)$")


class ShardFormatError(ValueError):
    """A shard is not a tar file we can index, or its index does not fit it."""


@dataclass(frozen=True)
class ShardIndex:
    """The samples of one shard: ``samples[j]`` is (key, {extension: (offset, size)})."""

    shard_bytes: int
    samples: list[tuple[str, dict[str, tuple[int, int]]]]

    def __len__(self) -> int:
        return len(self.samples)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "shard_bytes": self.shard_bytes,
            "samples": [
                [key, [[ext, offset, size] for ext, (offset, size) in members.items()]]
                for key, members in self.samples
            ],
        }

    @staticmethod
    def from_json(data: dict[str, Any], where: str) -> ShardIndex:
        if data.get("format") != FORMAT or data.get("version") != VERSION:
            raise ShardFormatError(f"{where} is not a flowloader tar index (version {VERSION})")
        samples = [
            (str(key), {str(ext): (int(offset), int(size)) for ext, offset, size in members})
            for key, members in data["samples"]
        ]
        return ShardIndex(int(data["shard_bytes"]), samples)


def split_name(name: str) -> tuple[str, str] | None:
    """(key, extension) of a member name, or None for a name without an extension."""
    match = _KEY_AND_EXTENSION.match(name)
    return None if match is None else (match.group(1), match.group(2).lower())


def sample_part(member: tarfile.TarInfo) -> tuple[str, str] | None:
    """(key, extension) of a tar member that is part of a sample, or None for what WebDataset
    passes over: directories, links, hidden files, names without an extension."""
    if not member.isfile() or os.path.basename(member.name).startswith("."):
        return None
    return split_name(member.name)


def scan(stream: IO[bytes], shard_bytes: int, where: str) -> ShardIndex:
    """Index a tar stream by reading its headers (the member data is skipped over)."""
    samples: list[tuple[str, dict[str, tuple[int, int]]]] = []
    try:
        with tarfile.open(fileobj=stream, mode="r:") as archive:
            for member in archive:
                parts = sample_part(member)
                if parts is None:
                    continue
                key, extension = parts
                if member.offset_data + member.size > shard_bytes:
                    raise ShardFormatError(
                        f"{where} is truncated: member {member.name} ends at byte "
                        f"{member.offset_data + member.size}, the shard has {shard_bytes}"
                    )
                if not samples or samples[-1][0] != key:
                    samples.append((key, {}))
                members = samples[-1][1]
                if extension in members:
                    raise ShardFormatError(
                        f"{where}: sample {key!r} has two members with extension {extension!r}"
                    )
                members[extension] = (member.offset_data, member.size)
            end = archive.offset  # just past the last member
    except tarfile.TarError as error:
        raise ShardFormatError(f"{where} is not a readable tar file: {error}") from error
    # A whole tar ends in two zero blocks; without them the file was cut short (tarfile
    # takes a cut-off header for the end).
    stream.seek(end)
    if stream.read(2 * 512) != bytes(2 * 512):
        raise ShardFormatError(f"{where} is truncated: it ends without the tar end blocks")
    return ShardIndex(shard_bytes, samples)


def load_or_build(path: str, sidecar: str | None = None, url: str | None = None) -> ShardIndex:
    """The index of the local shard file ``path``: from ``sidecar`` (default: beside the
    shard) when it matches the shard's size, else scanned and saved there when the directory
    is writable. ``url`` names the shard in errors."""
    where = url or path
    shard_bytes = os.path.getsize(path)
    sidecar = sidecar or path + INDEX_SUFFIX
    if os.path.exists(sidecar):
        with open(sidecar, encoding="utf-8") as stream:
            try:
                index = ShardIndex.from_json(json.load(stream), sidecar)
            except (ValueError, KeyError, TypeError):
                index = None
        if index is not None and index.shard_bytes == shard_bytes:
            return index
    with open(path, "rb") as stream:
        index = scan(stream, shard_bytes, where)
    save(index, sidecar)
    return index


def save(index: ShardIndex, sidecar: str) -> bool:
    """Write ``index`` to ``sidecar`` atomically; False if the directory is not writable."""
    temporary = f"{sidecar}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as stream:
            json.dump(index.to_json(), stream, separators=(",", ":"))
        os.replace(temporary, sidecar)
    except OSError:
        return False
    return True
