"""A video's index: its frames' timestamps in presentation order and which frames are
keyframes, read once from the container's packets (no decoding) and cached.

Frames are counted by their timestamps, not by a frame rate, so a variable-frame-rate file
indexes as it plays. The index is one small file of int64 numbers (a header, the
timestamps, the keyframe positions), read with one ``np.fromfile``: opening a dataset of
many cached videos costs a ``stat`` and a small read per video. It is written beside the
video (``<video>.flowloader-index``), or into a cache directory when the video's folder
cannot be written or one is given, and belongs to the file by its size and modification
time, or failing those by a digest of its content (a copy opens as it is); a rewritten
file is indexed again.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..text.index import file_digest, write_atomically

SUFFIX = ".flowloader-index"
DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "flowloader", "video")
_MAGIC = 0x464C56494458  # "FLVIDX"
_VERSION = 2
_HEADER = 6  # magic, version, the file's size and mtime_ns, its digest (2 numbers)


@dataclass(frozen=True)
class VideoIndex:
    """What decoding a clip needs to know about one video."""

    pts: np.ndarray  # int64, each frame's timestamp in presentation order (time_base units)
    keyframes: np.ndarray  # int64, the positions (into ``pts``) of the keyframes, ascending
    time_base: Fraction
    width: int
    height: int

    @property
    def frames(self) -> int:
        return len(self.pts)

    def keyframe_before(self, position: int) -> int:
        """The position of the last keyframe at or before ``position`` (0 when none is)."""
        k = int(np.searchsorted(self.keyframes, position, side="right")) - 1
        return int(self.keyframes[k]) if k >= 0 else 0

    def seconds(self, positions: np.ndarray) -> np.ndarray:
        """The timestamps of ``positions`` in seconds."""
        return self.pts[positions] * (self.time_base.numerator / self.time_base.denominator)


def open_container(path: str) -> Any:
    """``av.open(path)``, with FFmpeg's refusal turned into a ValueError naming the file."""
    import av

    try:
        return av.open(path)
    except av.error.FileNotFoundError:
        raise FileNotFoundError(f"no such video: {path}") from None
    except (av.error.FFmpegError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not a video or audio file FFmpeg can read ({error})") from error


def first_stream(container: Any, path: str, kind: str) -> Any:
    """The container's first ``kind`` ("video" or "audio") stream; ValueError naming the
    file when it has none."""
    streams = getattr(container.streams, kind)
    if not streams:
        kinds = sorted({stream.type for stream in container.streams}) or ["none"]
        raise ValueError(f"{path}: has no {kind} stream (its streams: {', '.join(kinds)})")
    return streams[0]


def scan(path: str) -> VideoIndex:
    """Read ``path``'s packets (not decoding them) for its frames' timestamps and keyframes.
    ValueError naming the file when it is not a video, has no video stream, holds no frame,
    or is cut short (a packet that cannot be read)."""
    import av

    with open_container(path) as container:
        stream = first_stream(container, path, "video")
        found: list[tuple[int, bool]] = []
        try:
            for packet in container.demux(stream):
                if packet.size and not packet.is_discard:
                    if packet.pts is None:
                        raise ValueError(
                            f"{path}: packet {len(found)} has no timestamp; flowloader.video "
                            "indexes frames by their timestamps (remux the file, e.g. "
                            "`ffmpeg -i in -c copy out.mp4`)"
                        )
                    found.append((int(packet.pts), bool(packet.is_keyframe)))
        except av.error.FFmpegError as error:
            raise ValueError(
                f"{path}: truncated or corrupt after {len(found)} frames ({error})"
            ) from error
        if not found:
            raise ValueError(f"{path}: its video stream holds no frame")
        time_base = stream.time_base
        width, height = stream.codec_context.width, stream.codec_context.height
    order = sorted(found)
    pts = np.array([p for p, _ in order], dtype=np.int64)
    keyframes = np.array([i for i, (_, key) in enumerate(order) if key], dtype=np.int64)
    if np.any(np.diff(pts) == 0):
        raise ValueError(f"{path}: two frames share a timestamp; it cannot be indexed by time")
    return VideoIndex(pts, keyframes, Fraction(time_base), int(width), int(height))


def index_path(path: str, cache_dir: str | None, suffix: str = SUFFIX) -> str:
    """Where ``path``'s index is kept: beside it, or in ``cache_dir`` under a name made from
    its absolute path."""
    if cache_dir is None:
        return path + suffix
    key = hashlib.blake2b(os.path.abspath(path).encode(), digest_size=12).hexdigest()
    return os.path.join(cache_dir, f"{os.path.basename(path)}.{key}{suffix}")


def load_or_scan(path: str, cache_dir: str | None = None) -> VideoIndex:
    """``path``'s index: read from its cache when one matches the file, else scanned and
    cached (beside the file, or in ``cache_dir`` or the default cache when its folder cannot
    be written)."""
    numbers = cached_numbers(
        path, cache_dir, SUFFIX, _MAGIC, lambda: _video_numbers(scan(path)), _whole_video
    )
    num, den, width, height, frames = (int(x) for x in numbers[:5])
    pts = numbers[6 : 6 + frames]
    return VideoIndex(pts, numbers[6 + frames :], Fraction(num, den), width, height)


def _whole_video(numbers: np.ndarray) -> bool:
    return len(numbers) >= 6 and len(numbers) == 6 + int(numbers[4]) + int(numbers[5])


def _video_numbers(index: VideoIndex) -> np.ndarray:
    tb = index.time_base
    fields = [tb.numerator, tb.denominator, index.width, index.height, index.frames]
    header = np.array([*fields, len(index.keyframes)], dtype=np.int64)
    return np.concatenate([header, index.pts, index.keyframes])


def cached_numbers(
    path: str,
    cache_dir: str | None,
    suffix: str,
    magic: int,
    scan: Callable[[], np.ndarray],
    whole: Callable[[np.ndarray], bool],
) -> np.ndarray:
    """The int64 numbers that describe ``path`` (an index), read from the first cache file
    that matches the file as it is now and is ``whole`` (not cut short), else ``scan()`` and
    written to the first place that can be written: beside the file (``path + suffix``) or in
    ``cache_dir``, then the default cache."""
    places = [index_path(path, cache_dir, suffix)]
    if cache_dir is None:
        places.append(index_path(path, DEFAULT_CACHE, suffix))
    info = os.stat(path)
    for place in places:
        numbers = _read(place, path, info, magic)
        if numbers is not None and whole(numbers):
            return numbers
    numbers = scan()
    for place in places:
        try:
            os.makedirs(os.path.dirname(place) or ".", exist_ok=True)
            _write(place, path, magic, numbers)
            break
        except OSError:
            continue  # a folder that cannot be written: the next place
    return numbers


def _digest_numbers(path: str) -> list[int]:
    digest = bytes.fromhex(file_digest(path))
    return [
        int.from_bytes(digest[:8], "little", signed=True),
        int.from_bytes(digest[8:], "little", signed=True),
    ]


def _write(place: str, path: str, magic: int, numbers: np.ndarray) -> None:
    info = os.stat(path)
    header = [magic, _VERSION, info.st_size, info.st_mtime_ns, *_digest_numbers(path)]
    whole = np.concatenate([np.array(header, dtype=np.int64), numbers])
    write_atomically(place, whole.tofile)


def _read(place: str, path: str, info: os.stat_result, magic: int) -> np.ndarray | None:
    """The numbers cached at ``place`` when they describe ``path`` as it is now."""
    try:
        numbers = np.fromfile(place, dtype=np.int64)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return None
    if len(numbers) < _HEADER or numbers[0] != magic or numbers[1] != _VERSION:
        return None
    if numbers[2] != info.st_size:
        return None
    if numbers[3] != info.st_mtime_ns and list(numbers[4:6]) != _digest_numbers(path):
        return None
    return numbers[_HEADER:]
