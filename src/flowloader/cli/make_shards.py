"""Packing an ImageFolder into shards: ``flowloader make-shards SRC DST``.

Each image becomes a sample ``<class>/<file stem>`` with its bytes as they are, under its
file extension (``jpg``, ``png``, ...), and its class index as ``cls``. Shard boundaries are
planned from the file sizes before anything is written, so a rerun after an interruption
finds the same shards: a shard whose index lists exactly its planned samples is kept, any
other is written again. Every written shard is read back and compared with the files.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from flowloader.shards import ShardedDataset, tar_index
from flowloader.shards.writer import ShardCutter, ShardWriter, tar_size
from flowloader.vision.datasets import ImageFolder

PATTERN = "shard-%06d.tar"


@dataclass(frozen=True)
class Planned:
    key: str
    path: str
    extension: str
    target: int


@dataclass
class PackReport:
    shards: list[str]
    written: int
    kept: int
    samples: int
    extensions: list[str]  # the images' members ("jpg", "png", ...), sorted


def read_back(destination: str, extensions: list[str]) -> str:
    """The line of Python that reads the shards in ``destination`` back."""
    if extensions == ["jpg"]:
        return f"flowloader.vision.datasets.ImageShards({destination!r})"
    if len(extensions) == 1:
        key = extensions[0]
        return f"flowloader.vision.datasets.ImageShards({destination!r}, image_key={key!r})"
    members = ", ".join(extensions)
    return f"flowloader.shards.ShardedDataset({destination!r})  (images: {members}; labels: cls)"


def plan_image_folder(source: str) -> list[Planned]:
    """The samples of the ImageFolder at ``source``, in ImageFolder's order."""
    folder = ImageFolder(source)
    planned = []
    for path, target in folder.samples:
        relative = os.path.relpath(path, source)
        stem, extension = os.path.splitext(relative)
        key = stem.replace(os.sep, "/").replace(".", "_")
        planned.append(Planned(key, path, extension.lstrip(".").lower(), int(target)))
    return planned


def split(planned: list[Planned], max_count: int, max_size: int) -> list[list[Planned]]:
    """The samples of each shard, as :func:`flowloader.shards.write_shards` would cut them."""
    cutter = ShardCutter(max_count, max_size)
    groups: list[list[Planned]] = []
    for sample in planned:
        if cutter.place(tar_size([os.path.getsize(sample.path), len(str(sample.target))])):
            groups.append([])
        groups[-1].append(sample)
    return groups


def pack_image_folder(
    source: str,
    destination: str,
    max_count: int = 10_000,
    max_size: int = 1 << 30,
    progress: Callable[[int], None] | None = None,
) -> PackReport:
    """Write ``source`` (an ImageFolder) as shards into ``destination``; resumable."""
    planned = plan_image_folder(source)
    groups = split(planned, max_count, max_size)
    os.makedirs(destination, exist_ok=True)
    paths, written, done = [], 0, 0
    for number, group in enumerate(groups):
        path = os.path.join(destination, PATTERN % number)
        paths.append(path)
        if not _complete(path, group):
            writer = ShardWriter(path)
            try:
                for sample in group:
                    with open(sample.path, "rb") as stream:
                        data = stream.read()
                    writer.write(
                        [
                            (f"{sample.key}.{sample.extension}", data),
                            (f"{sample.key}.cls", str(sample.target).encode()),
                        ]
                    )
            except BaseException:
                writer.abandon()
                raise
            writer.close()
            _verify(path, group)
            written += 1
        done += len(group)
        if progress is not None:
            progress(done)
    extensions = sorted({sample.extension for sample in planned})
    return PackReport(paths, written, len(groups) - written, done, extensions)


def _complete(path: str, group: list[Planned]) -> bool:
    """True if ``path`` is a finished shard holding exactly ``group`` (a kept shard)."""
    if not (os.path.exists(path) and os.path.exists(path + tar_index.INDEX_SUFFIX)):
        return False
    try:
        index = tar_index.load_or_build(path)
    except (OSError, ValueError):
        return False
    return [key for key, _ in index.samples] == [sample.key for sample in group]


def _verify(path: str, group: list[Planned]) -> None:
    """Read the shard back and compare every sample with its source file."""
    shard = ShardedDataset([path])
    if len(shard) != len(group):
        raise OSError(f"{path}: wrote {len(group)} samples, reads back {len(shard)}")
    for position, sample in enumerate(group):
        stored = shard.raw(position)
        with open(sample.path, "rb") as stream:
            same = stored.get(sample.extension) == stream.read()
        if not same or stored.get("cls") != str(sample.target).encode():
            raise OSError(f"{path}: sample {sample.key!r} does not read back as written")
