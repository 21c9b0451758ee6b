"""VideoClips: every clip of every video, as a map-style dataset.

Clip i is arithmetic on the videos' frame counts: which video (a search in the running clip
counts) and its first frame (the clip's number in that video times ``clip_stride``). So a
sampler orders clips as it orders rows, and workers, resume and world size do not matter.
Only the frame counts live in the dataset; each video's full index (timestamps, keyframes)
is read from its cache file when a worker first decodes that video, and kept for the last
few videos it decoded.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

import flowloader as fl

from ..resources import usable_cores
from .audio import AUDIO_SUFFIX, audio_window, load_or_scan_audio
from .decode import ClipDecodeError, Put, decode_frames
from .decode_torchcodec import decode_frames_torchcodec, frame_mappings, torchcodec_available
from .files import local_files
from .index import SUFFIX, VideoIndex, load_or_scan
from .spans import FileSpans

DECODERS = ("pyav", "torchcodec")
# A folder's videos: its files with these suffixes (any case). A glob takes any file.
VIDEO_SUFFIXES = (
    ".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi", ".mpg", ".mpeg", ".ts", ".m2ts", ".mts",
    ".flv", ".wmv", ".3gp", ".ogv",
)  # fmt: skip
# Index files an earlier version wrote beside the videos: never taken for videos by a glob.
INDEX_SUFFIXES = (SUFFIX, AUDIO_SUFFIX)


class VideoClips(FileSpans):
    """Clip ``i`` of the videos at ``paths``: ``clip_len`` frames, ``frame_step`` apart (a
    clip spans ``(clip_len - 1) * frame_step + 1`` frames), clips ``clip_stride`` frames
    apart in each video (default: the span, so clips do not overlap).

    ``paths`` is a video, a folder (its videos by suffix, ``VIDEO_SUFFIXES``, recursively,
    in sorted order), a glob (its files, sorted), or a list of these, as ``ParquetDataset``
    takes its files; ``path(i)`` is clip i's video.

    ``ds[i]`` is a dict: ``frames`` (uint8, ``clip_len x H x W x 3`` RGB, at ``size`` when
    given, converted and scaled by FFmpeg in one pass), ``pts`` (each frame's time in
    seconds) and ``video`` (the video's number). ``size`` is (height, width), or an int for
    a square: ``size=224`` is 224x224, as torchvision's ``CenterCrop(224)`` (every frame is
    scaled to exactly that, its aspect ratio not kept), so clips of videos of different
    shapes stack into one batch; without ``size`` each video keeps its own, and a batch of
    clips of two shapes is a list. Frames are exactly those of a sequential decode of the
    file at the same conversion. ``threads``: FFmpeg's decoding threads per worker
    ("auto": the usable cores shared among the loader's workers). ``decoder="torchcodec"``
    decodes with torchcodec where it imports (handed this index, so it does not scan the
    file): the same frames at full size; resized by torchcodec's own Resize (bilinear,
    antialiased), so close to PyAV's but not equal.

    With ``audio=True`` an item also holds ``audio``: the video's audio track from the
    clip's first frame to the frame after its last, float32 at ``sample_rate`` (the
    channels' mean when ``mono``, else ``channels x samples``), sample for sample as
    ``AudioClips`` cuts it; its length follows the clip's duration, so it is the same for
    every clip at one constant frame rate.

    Each video is indexed once (its frames' timestamps and keyframes, from reading every
    packet) and the index cached in ``cache_dir``, by default the user's cache directory
    (``$FLOWLOADER_CACHE``, else ``$XDG_CACHE_HOME/flowloader``, else ``~/.cache/flowloader``,
    under ``video/``): not beside the videos, where the user's next ``glob("videos/*")``
    would find the index files, and read-only datasets need no write. A video too short for
    one clip, not a video, without a video stream, or cut short (fewer frames than its
    container promises) is a ValueError naming the file; a clip whose decoding fails (a
    damaged file) is a ``ClipDecodeError`` naming the file, the clip and the frame.
    """

    FORMAT, UNIT, WHAT = "flowloader.video.VideoClips", "frames", "video"
    SETTINGS = "clip_len, frame_step, clip_stride"

    def __init__(
        self,
        paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        clip_len: int,
        *,
        frame_step: int = 1,
        clip_stride: int | None = None,
        size: int | tuple[int, int] | None = None,
        decoder: str = "pyav",
        threads: int | str = 1,
        audio: bool = False,
        sample_rate: int = 16000,
        mono: bool = True,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        _positive("clip_len", clip_len)
        _positive("frame_step", frame_step)
        if decoder not in DECODERS:
            raise ValueError(f"decoder should be one of {DECODERS}, got {decoder!r}")
        if decoder == "torchcodec" and not torchcodec_available():
            raise ValueError(
                'decoder="torchcodec" needs torchcodec, which does not import here (pip install '
                "torchcodec; it needs torch and FFmpeg's shared libraries)"
            )
        if threads != "auto":
            _positive("threads", threads)
        self.paths = local_files(paths, VIDEO_SUFFIXES, "video", ignore=INDEX_SUFFIXES)
        self.clip_len, self.frame_step = int(clip_len), int(frame_step)
        span = (self.clip_len - 1) * self.frame_step + 1
        self.clip_stride = span if clip_stride is None else int(clip_stride)
        _positive("clip_stride", self.clip_stride)
        self.size, self.decoder, self.threads = frame_size(size), decoder, threads
        self.cache_dir = None if cache_dir is None else os.fspath(cache_dir)
        self.audio, self.sample_rate, self.mono = bool(audio), int(sample_rate), bool(mono)
        if self.audio and (isinstance(sample_rate, bool) or self.sample_rate < 1):
            raise ValueError(f"sample_rate should be a positive integer, got {sample_rate!r}")
        frames = []
        for path in self.paths:
            index = load_or_scan(path, self.cache_dir)
            if index.frames < span:
                raise ValueError(
                    f"{path}: {index.frames} frames, too short for one clip of {span} "
                    f"(clip_len={self.clip_len}, frame_step={self.frame_step})"
                )
            frames.append(index.frames)
            if self.audio:
                load_or_scan_audio(path, self.cache_dir)  # a video without audio is refused now
        settings = [self.clip_len, self.frame_step, self.clip_stride]
        self._count(frames, span, self.clip_stride, settings)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.__getitems__([index])[0]

    def __getitems__(
        self, indices: Sequence[int], allocate: fl.batching.Allocate | None = None
    ) -> Any:
        """The clips at ``indices``, in that order; each video's clips decoded together, in
        time order, from one open container. With ``allocate`` (the loader's: in a worker
        process, shared memory) and clips of one size, the frames are written straight into
        the batch's array, each once, and the batch comes back as its columns."""
        located = [self.locate(int(i)) for i in indices]
        clips = [int(i) % len(self) for i in indices]
        shapes = {self._frame_shape(video) for video, _ in located}
        if allocate is None or len(shapes) != 1:
            return self._clip_list(located, clips)
        (shape,) = shapes
        frames = allocate((len(located), self.clip_len, *shape, 3), np.uint8)
        slots: dict[int, dict[int, list[tuple[int, int]]]] = {}
        for k, (video, start) in enumerate(located):
            for t in range(self.clip_len):
                slots.setdefault(video, {}).setdefault(start + t * self.frame_step, []).append(
                    (k, t)
                )

        def put_for(video: int) -> Put:
            def put(position: int, frame: np.ndarray) -> None:
                for k, t in slots[video][position]:
                    frames[k, t] = frame

            return put

        for video, places in slots.items():
            self._decode(video, sorted(places), put_for(video), located, clips)
        columns: dict[str, Any] = {
            "frames": frames,
            "pts": np.stack([self._pts(video, start) for video, start in located]),
            "video": np.array([video for video, _ in located], dtype=np.int64),
        }
        if self.audio:
            audio = [
                self._audio(video, start, clip)
                for (video, start), clip in zip(located, clips, strict=True)
            ]
            if len({len(a) for a in audio}) > 1:  # clips of different lengths: not stacked
                return self._clip_list(located, clips)
            columns["audio"] = np.stack(audio)
        return fl.batching.CollatedRecords(columns)

    def _clip_list(self, located: list[tuple[int, int]], clips: list[int]) -> list[dict[str, Any]]:
        """The clips as a list of dicts, one array of frames each."""
        wanted: dict[int, set[int]] = {}
        for video, start in located:
            wanted.setdefault(video, set()).update(range(start, start + self.span, self.frame_step))
        by_video: dict[int, dict[int, np.ndarray]] = {video: {} for video in wanted}
        for video, positions in wanted.items():
            frames = by_video[video]

            def put(position: int, frame: np.ndarray, frames: dict = frames) -> None:
                frames[position] = frame.copy()

            self._decode(video, sorted(positions), put, located, clips)
        items = []
        for (video, start), number in zip(located, clips, strict=True):
            clip = range(start, start + self.span, self.frame_step)
            item = {
                "frames": np.stack([by_video[video][p] for p in clip]),
                "pts": self._pts(video, start),
                "video": video,
            }
            if self.audio:
                item["audio"] = self._audio(video, start, number)
            items.append(item)
        return items

    def _decode(
        self,
        video: int,
        positions: list[int],
        put: Put,
        located: list[tuple[int, int]],
        clips: list[int],
    ) -> None:
        """Decode ``positions`` of video ``video`` (frames of the clips ``clips`` at
        ``located``); a ClipDecodeError is raised again naming the clips that hold its frames."""
        index, threads = self._index(video), self._threads()
        try:
            if self.decoder == "torchcodec":
                mappings = self._mappings(video)
                path = self.paths[video]
                decode_frames_torchcodec(path, index, positions, self.size, threads, put, mappings)
            else:
                decode_frames(self.paths[video], index, positions, self.size, threads, put)
        except ClipDecodeError as error:
            frames = set(error.frames)
            holding = [
                clip
                for (v, start), clip in zip(located, clips, strict=True)
                if v == video
                and (not frames or frames & set(range(start, start + self.span, self.frame_step)))
            ]
            raise ClipDecodeError(f"{error}, in {_clips_text(holding)}", error.frames) from error

    def _frame_shape(self, video: int) -> tuple[int, int]:
        """(height, width) of video ``video``'s frames as this dataset gives them."""
        if self.size is not None:
            return self.size
        index = self._index(video)
        return index.height, index.width

    def _pts(self, video: int, start: int) -> np.ndarray:
        return self._index(video).seconds(np.arange(start, start + self.span, self.frame_step))

    def _audio(self, video: int, start: int, clip: int) -> np.ndarray:
        """The audio from clip ``clip``'s first frame (``start``) to the frame after its last
        (the last frame's end, at the video's mean frame interval, when the clip ends the
        video), at ``sample_rate``."""
        index = self._index(video)
        audio = self.remembered(
            "audio", video, lambda: load_or_scan_audio(self.paths[video], self.cache_dir)
        )
        pts, end = index.pts, start + self.span
        step = (int(pts[-1]) - int(pts[0])) // max(len(pts) - 1, 1)
        stop = int(pts[end]) if end < len(pts) else int(pts[-1]) + step
        first = (int(pts[start]) * index.time_base - audio.start) * self.sample_rate
        count = (stop - int(pts[start])) * index.time_base * self.sample_rate
        try:
            return audio_window(
                self.paths[video], audio, self.sample_rate, self.mono, round(first), round(count)
            )
        except ClipDecodeError as error:
            raise ClipDecodeError(f"{error}, in {_clips_text([clip])}") from error

    def _index(self, video: int) -> VideoIndex:
        """Video ``video``'s full index, from its cache file (kept for the last few)."""
        return self.remembered("video", video, lambda: self._read_index(video))

    def _read_index(self, video: int) -> VideoIndex:
        index = load_or_scan(self.paths[video], self.cache_dir)
        changed = self.changed_length(video, index.frames)
        if changed:
            raise ValueError(changed)
        return index

    def _mappings(self, video: int) -> str:
        """Video ``video``'s index as torchcodec's frame mappings (kept as the indexes are)."""
        return self.remembered("torchcodec", video, lambda: frame_mappings(self._index(video)))

    def _threads(self) -> int:
        """FFmpeg's threads for this worker: as given, or ("auto") the usable cores shared
        among the loader's workers (all of them with no workers)."""
        if self.threads != "auto":
            return int(self.threads)
        info = fl.get_worker_info()
        workers = info.num_workers if info is not None else 1
        cores = self.remembered("cores", -1, usable_cores)  # reads cgroup files: once
        return max(1, cores // workers)


def frame_size(size: Any) -> tuple[int, int] | None:
    """``size`` as (height, width): an int is a square (``224``: 224x224); None stays None."""
    if size is None:
        return None
    pair = (size, size) if isinstance(size, (int, np.integer)) else size
    if (
        not isinstance(pair, (tuple, list))
        or len(pair) != 2
        or not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in pair)
        or min(pair) < 1
    ):
        raise ValueError(
            f"size should be (height, width) in pixels, or an int for a square, got {size!r}"
        )
    return int(pair[0]), int(pair[1])


def _clips_text(clips: list[int]) -> str:
    """The clips named in a message: "clip 7", "clips 3, 4, 9", "clips 1, 2, 3, 4, 5 and 12
    more"."""
    if len(clips) == 1:
        return f"clip {clips[0]}"
    shown = ", ".join(str(c) for c in clips[:5])
    rest = clips[5:]
    tail = f" and {len(rest)} more" if len(rest) > 1 else f" and {rest[0]}" if rest else ""
    return f"clips {shown}{tail}"


def _positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} should be a positive integer, got {value!r}")
