"""A video's index: its frames' timestamps in presentation order and which frames are
keyframes, read once from the container's packets (no decoding) and cached.

Frames are counted by their timestamps, not by a frame rate, so a variable-frame-rate file
indexes as it plays. The scan reads every packet, so a file cut short is found here: its
container promising more frames (or a longer stream) than its packets hold, or its last
packet cut, is a ValueError naming it. The index is one small file of int64 numbers (a
header, the timestamps, the keyframe positions), read with one ``np.fromfile``: opening a
dataset of many cached videos costs a ``stat`` and a small read per video. It is kept in a
cache directory, by default the user's (``$FLOWLOADER_CACHE``, else
``$XDG_CACHE_HOME/flowloader``, else ``~/.cache/flowloader``; under ``video/``), not beside
the video: a glob of the user's videos never finds it, and a read-only dataset needs no
write. It belongs to the file by its size and modification time, or failing those by a
digest of its content (a copy opens as it is); a rewritten file is indexed again, and so is
one whose index an earlier version of the format cached.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..text.index import file_digest, write_atomically
from .files import user_cache_dir

SUFFIX = ".flowloader-index"
_MAGIC = 0x464C56494458  # "FLVIDX"
# 3: the scan refuses a file cut short (a container promising more than its packets hold), and
# indexes are cached in a cache directory; an index an earlier version cached is scanned again.
_VERSION = 3
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
    or is cut short (a packet that cannot be read, or fewer than its container promises)."""
    import av

    with open_container(path) as container:
        stream = first_stream(container, path, "video")
        found: list[tuple[int, bool]] = []
        read = Packets()
        try:
            for packet in container.demux(stream):
                if packet.size or packet.pts is not None:  # not the demuxer's closing one
                    read.add(packet, stream.time_base)
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
        read.check_whole(path, container, stream, "frames")
        time_base = stream.time_base
        width, height = stream.codec_context.width, stream.codec_context.height
    order = sorted(found)
    pts = np.array([p for p, _ in order], dtype=np.int64)
    keyframes = np.array([i for i, (_, key) in enumerate(order) if key], dtype=np.int64)
    if np.any(np.diff(pts) == 0):
        raise ValueError(f"{path}: two frames share a timestamp; it cannot be indexed by time")
    return VideoIndex(pts, keyframes, Fraction(time_base), int(width), int(height))


class Packets:
    """What a scan read of one stream's packets, to tell a file cut short: how many there
    were (the demuxer's closing empty packet aside), the span of their timestamps (seconds),
    the last one's length, and whether FFmpeg flagged the last corrupt (a packet read short:
    the file ends inside it)."""

    def __init__(self) -> None:
        self.count, self.timed = 0, 0
        self.first, self.end, self.step = float("inf"), 0.0, 0.0
        self.last_corrupt = False

    def add(self, packet: Any, time_base: Fraction) -> None:
        """Count ``packet``."""
        self.count += 1
        self.last_corrupt = bool(packet.is_corrupt)
        if packet.pts is not None:
            self.timed += 1
            at = float(packet.pts * time_base)
            self.step = float((packet.duration or 0) * time_base) or self.step
            self.first, self.end = min(self.first, at), max(self.end, at + self.step)

    def check_whole(self, path: str, container: Any, stream: Any, unit: str) -> None:
        """ValueError naming ``path`` when it is cut short: its last packet read short, fewer
        packets than the container's count of them, or the packets ending before where the
        container says the stream ends (its duration; the file's, for a file of this stream
        alone) by more than two packets (their mean spacing or the last one's length): a
        muxer's rounding is never so much, a file cut short almost always more."""
        cut = "cut short or damaged (download or copy it again)"
        if self.last_corrupt:
            raise ValueError(f"{path}: {cut}: its last {stream.type} packet is incomplete")
        if stream.frames and self.count < stream.frames:
            raise ValueError(
                f"{path}: {cut}: its container promises {stream.frames} {stream.type} "
                f"{unit}, its packets hold {self.count}"
            )
        promised = _promised_end(container, stream)
        spacing = (self.end - self.first) / self.timed if self.timed else 0.0
        if promised is not None and promised - self.end > 2 * max(spacing, self.step) + 0.001:
            raise ValueError(
                f"{path}: {cut}: its container says the {stream.type} stream lasts until "
                f"{promised:.3f} s, its packets end at {self.end:.3f} s"
            )


def _promised_end(container: Any, stream: Any) -> float | None:
    """Where the container says ``stream`` ends (seconds): its own duration, or the file's
    when the file holds this stream alone; None when it does not say."""
    if stream.duration:
        start = stream.start_time or 0
        return float((start + stream.duration) * stream.time_base)
    if len(container.streams) == 1 and container.duration:
        return ((container.start_time or 0) + container.duration) / 1_000_000
    return None


def default_cache_dir() -> str:
    """Where indexes are cached when no ``cache_dir`` is given: the user's cache directory
    (``$FLOWLOADER_CACHE``, else ``$XDG_CACHE_HOME/flowloader``, else ``~/.cache/flowloader``),
    under ``video/``; never beside the videos, where a glob of them would find the indexes."""
    return user_cache_dir("video")


def index_path(path: str, cache_dir: str | None = None, suffix: str = SUFFIX) -> str:
    """Where ``path``'s index is kept: in ``cache_dir`` (default: ``default_cache_dir()``),
    under a name made from the file's name and its absolute path."""
    folder = default_cache_dir() if cache_dir is None else os.fspath(cache_dir)
    key = hashlib.blake2b(os.path.abspath(path).encode(), digest_size=12).hexdigest()
    return os.path.join(folder, f"{os.path.basename(path)}.{key}{suffix}")


def load_or_scan(path: str, cache_dir: str | None = None) -> VideoIndex:
    """``path``'s index: read from its cache when one matches the file, else scanned and
    cached (in ``cache_dir``, default ``default_cache_dir()``)."""
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
    """The int64 numbers that describe ``path`` (an index), read from its cache file when it
    matches the file as it is now and is ``whole`` (not cut short), else ``scan()`` and
    written there (``index_path``). A cache that cannot be written is warned about once per
    folder: the numbers are then scanned again in each process that opens the file."""
    place = index_path(path, cache_dir, suffix)
    info = os.stat(path)
    numbers = _read(place, path, info, magic)
    if numbers is not None and whole(numbers):
        return numbers
    numbers = scan()
    folder = os.path.dirname(place)
    try:
        os.makedirs(folder, exist_ok=True)
        _write(place, path, magic, numbers)
    except OSError as error:
        if folder not in _UNWRITABLE:
            _UNWRITABLE.add(folder)
            warnings.warn(
                f"cannot cache video and audio indexes in {folder} ({error}); each process "
                "will scan its videos again: give cache_dir= a folder that can be written",
                stacklevel=4,  # the user's line making the dataset (through load_or_scan*)
            )
    return numbers


_UNWRITABLE: set[str] = set()  # cache folders warned about


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
