"""AudioClips: fixed-length windows of audio files (or of videos' audio tracks), resampled to
one rate, as a map-style dataset.

Window i is arithmetic on the files' lengths at the output rate, as VideoClips' clips are on
frame counts: so ClipSampler and UniformClipSampler order windows too, and workers, resume and
world size do not matter. A window holds exactly the samples of the whole file resampled
(``resample``'s filter is anchored at the file's first sample), wherever it is cut.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from .audio import AudioIndex, audio_window, load_or_scan_audio
from .clips import INDEX_SUFFIXES
from .decode import ClipDecodeError
from .files import local_files
from .spans import FileSpans

# A folder's audio files: its files with these suffixes (any case); a glob takes any file (a
# glob or a list of videos gives their audio tracks).
AUDIO_SUFFIXES = (
    ".wav", ".flac", ".mp3", ".m4a", ".aac", ".ogg", ".oga", ".opus", ".wma", ".aif", ".aiff",
    ".caf", ".mka",
)  # fmt: skip


class AudioClips(FileSpans):
    """Window ``i`` of the audio at ``paths``: ``clip_seconds`` long at ``sample_rate``,
    windows ``clip_stride`` seconds apart in each file (default: their length, no overlap).

    ``paths`` is a file, a folder (its audio files by suffix, ``AUDIO_SUFFIXES``,
    recursively, in sorted order), a glob (its files, sorted), or a list of these; any file
    FFmpeg reads with an audio stream works, videos included. ``path(i)`` is window i's file.

    ``ds[i]`` is a dict: ``audio`` (float32; ``samples`` long when ``mono``, the channels'
    mean, else ``channels x samples``), ``start`` (the window's time in seconds from the
    file's first sample) and ``file`` (the file's number). Each file is indexed once (every
    packet read) and the index cached in ``cache_dir``, by default the user's cache directory
    (as ``VideoClips``'s: never beside the files). A file too short for one window, without
    audio, or cut short (less audio than its container promises) is a ValueError naming it;
    a window whose decoding fails (a damaged file) is a ``ClipDecodeError`` naming the file,
    the window and its time.
    """

    FORMAT, UNIT, WHAT = "flowloader.video.AudioClips", "samples", "audio file"
    SETTINGS = "sample_rate, samples per window, samples apart"

    def __init__(
        self,
        paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        clip_seconds: float,
        *,
        sample_rate: int,
        mono: bool = True,
        clip_stride: float | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if isinstance(sample_rate, bool) or not isinstance(sample_rate, int) or sample_rate < 1:
            raise ValueError(f"sample_rate should be a positive integer, got {sample_rate!r}")
        self.clip_samples = _samples("clip_seconds", clip_seconds, sample_rate)
        stride = clip_seconds if clip_stride is None else clip_stride
        self.stride_samples = _samples("clip_stride", stride, sample_rate)
        self.paths = local_files(paths, AUDIO_SUFFIXES, "audio", ignore=INDEX_SUFFIXES)
        self.sample_rate, self.mono = sample_rate, bool(mono)
        self.cache_dir = None if cache_dir is None else os.fspath(cache_dir)
        lengths = []
        for path in self.paths:
            samples = load_or_scan_audio(path, self.cache_dir).out_samples(sample_rate)
            if samples < self.clip_samples:
                raise ValueError(
                    f"{path}: {samples / sample_rate:.3f} s of audio, too short for one "
                    f"window of {self.clip_samples / sample_rate:.3f} s"
                )
            lengths.append(samples)
        settings = [sample_rate, self.clip_samples, self.stride_samples]
        self._count(lengths, self.clip_samples, self.stride_samples, settings)

    def __getitem__(self, index: int) -> dict[str, Any]:
        file, first = self.locate(index)
        try:
            audio = audio_window(
                self.paths[file],
                self._index(file),
                self.sample_rate,
                self.mono,
                first,
                self.clip_samples,
            )
        except ClipDecodeError as error:
            raise ClipDecodeError(f"{error}, in window {index % len(self)}") from error
        return {"audio": audio, "start": first / self.sample_rate, "file": file}

    def _index(self, file: int) -> AudioIndex:
        return self.remembered("audio", file, lambda: self._read_index(file))

    def _read_index(self, file: int) -> AudioIndex:
        index = load_or_scan_audio(self.paths[file], self.cache_dir)
        changed = self.changed_length(file, index.out_samples(self.sample_rate))
        if changed:
            raise ValueError(changed)
        return index


def _samples(name: str, seconds: Any, rate: int) -> int:
    """``seconds`` at ``rate`` as a whole number of samples (at least one)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
        raise ValueError(f"{name} should be a positive number of seconds, got {seconds!r}")
    samples = round(seconds * rate)
    if samples < 1:
        raise ValueError(f"{name}={seconds} is less than one sample at {rate} samples/s")
    return samples
