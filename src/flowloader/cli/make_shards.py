"""Packing an ImageFolder into shards: ``flowloader make-shards SRC DST``.

Each image becomes a sample ``<class>/<file stem>`` with its bytes as they are, under its
file extension (``jpg``, ``png``, ...), and its class index as ``cls``. Shard boundaries are
planned from the file sizes before anything is written, so a rerun after an interruption
finds the same shards: a shard whose index lists exactly its planned samples is kept, any
other is written again. Every written shard is read back and compared with the files.

Each file is checked before the plan is made, so that a rerun plans the same shards: Pillow
must identify it (and verify it, which for PNG checks every chunk), and a JPEG must reach its
end-of-image marker (a cut-off file does not). Files that fail are skipped and reported, or,
with ``strict=True``, stop the packing before anything is written. Other formats (BMP, TIFF,
WebP, ...) are checked by their header only. The class indices stay the ImageFolder's even
when a file is skipped.

The class names go into ``classes.json`` in the destination (see
:mod:`flowloader.vision.datasets.image_shards`), rewritten by every run, which
:class:`~flowloader.vision.datasets.ImageShards` exposes as ``classes`` and ``class_to_idx``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

from flowloader.shards import ShardedDataset, tar_index
from flowloader.shards.writer import ShardCutter, ShardWriter, tar_size
from flowloader.vision.datasets import ImageFolder, find_classes
from flowloader.vision.datasets.image_shards import CLASSES_FILE

PATTERN = "shard-%06d.tar"
# A JPEG marker inside entropy-coded data: 0xFF followed by neither a stuffed zero, a fill
# byte nor a restart marker.
_JPEG_MARKER = re.compile(rb"\xff[^\x00\xff\xd0-\xd7]")


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
    skipped: list[tuple[str, str]]  # (path, what is wrong) of the files left out


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


def unreadable(path: str) -> str | None:
    """What makes the file at ``path`` no readable image, or None if it is one."""
    with open(path, "rb") as stream:
        kind = "image"
        try:
            with Image.open(stream) as image:
                kind = image.format or kind
                image.verify()
        except UnidentifiedImageError:
            return "Pillow cannot identify it as an image"
        except Exception as error:  # Pillow's plugins raise many kinds for damaged files
            return f"damaged {kind} ({type(error).__name__}: {error})"
        if kind in ("JPEG", "MPO"):
            # Almost every JPEG ends with its marker; one with bytes after it (a trailer, a
            # motion photo's video) is walked to find it.
            stream.seek(-2, os.SEEK_END)
            if stream.read() != b"\xff\xd9":
                stream.seek(0)
                if not _reaches_jpeg_end(stream.read()):
                    return "truncated JPEG (no end-of-image marker)"
    return None


def _reaches_jpeg_end(data: bytes) -> bool:
    """True if the JPEG ``data`` holds its end-of-image marker (FF D9), found by walking its
    segments (an embedded thumbnail's own marker is inside a segment, passed over)."""
    position = 2  # past the start-of-image marker
    while position + 2 <= len(data) and data[position] == 0xFF:
        marker = data[position + 1]
        if marker == 0xD9:
            return True
        if marker == 0xFF:  # a fill byte
            position += 1
        elif 0xD0 <= marker <= 0xD7 or marker == 0x01:  # markers without a length
            position += 2
        else:
            position += 2 + int.from_bytes(data[position + 2 : position + 4], "big")
            if marker == 0xDA:  # a scan: its entropy-coded data runs to the next marker
                found = _JPEG_MARKER.search(data, position)
                if found is None:
                    return False
                position = found.start()
    return False


def readable(planned: list[Planned], strict: bool) -> tuple[list[Planned], list[tuple[str, str]]]:
    """``planned`` without the files that are not readable images, and (path, what is wrong)
    of those; with ``strict``, the first such file raises a ValueError instead."""
    kept, skipped = [], []
    for sample in planned:
        problem = unreadable(sample.path)
        if problem is None:
            kept.append(sample)
        elif strict:
            raise ValueError(f"{sample.path} is not a readable image: {problem}")
        else:
            skipped.append((sample.path, problem))
    return kept, skipped


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
    strict: bool = False,
) -> PackReport:
    """Write ``source`` (an ImageFolder) as shards into ``destination``, skipping the files
    that are not readable images (``strict``: stop at the first); resumable. ``progress``
    gets the number of files done (packed or skipped)."""
    listed = plan_image_folder(source)
    planned, skipped = readable(listed, strict)
    if not planned:
        first = f" (first: {skipped[0][0]}: {skipped[0][1]})" if skipped else ""
        raise ValueError(f"{source}: none of its {len(listed)} files is a readable image{first}")
    groups = split(planned, max_count, max_size)
    os.makedirs(destination, exist_ok=True)
    paths, written, done = [], 0, len(skipped)
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
    write_classes(destination, find_classes(source)[0])
    extensions = sorted({sample.extension for sample in planned})
    return PackReport(paths, written, len(groups) - written, len(planned), extensions, skipped)


def write_classes(destination: str, classes: list[str]) -> None:
    """Record the class names, in index order, in ``destination``'s ``classes.json``
    (atomically: a reader never sees half of it)."""
    path = os.path.join(destination, CLASSES_FILE)
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as stream:
        json.dump({"classes": classes}, stream, ensure_ascii=False)
    os.replace(temporary, path)


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
