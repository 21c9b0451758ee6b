"""An audio stream as numbered samples: its index, and any window of it decoded and resampled.

The index (cached as a video's is) holds where the first decoded sample lies in time, the
source rate, the channels and the number of samples. A window is decoded from a seek a
little before it (``PREROLL_SECONDS``: the frames a codec decodes wrongly after a seek, AAC's
and MP3's first one or two, fall there and are dropped), each decoded frame put at its
place by the first frame's timestamp and the count of samples before it, so a window holds
exactly the samples a decode of the whole stream has there (sample-exact where the
container's timestamps count samples: WAV, FLAC, MP4/M4A, MP3; WebM's are milliseconds).
Samples past what the decoder gives are zeros. Resampling is ``resample``'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .decode import ClipDecodeError
from .index import Packets, cached_numbers, first_stream, open_container
from .resample import resample, source_span

AUDIO_SUFFIX = ".flowloader-audio-index"
PREROLL_SECONDS = 0.25
_MAGIC = 0x464C41494458  # "FLAIDX"
_SEEK_RETRIES = 3
# Codecs whose decoded samples after a seek (and a preroll) are those of a whole decode, in
# the tests; others (Opus: its pre-skip is applied again after a seek) decode from the start.
SEEK_EXACT_CODECS = frozenset({"aac", "mp3", "mp3float", "flac", "alac"})
_INT_SCALE = {np.dtype(np.int16): 2.0**15, np.dtype(np.int32): 2.0**31}


@dataclass(frozen=True)
class AudioIndex:
    """What cutting windows from one audio stream needs to know."""

    start: Fraction  # seconds: the time of the first decoded sample
    rate: int  # samples per second, per channel
    channels: int
    samples: int  # per channel, from the first decoded sample to the stream's end
    seekable: bool  # a seek lands sample-exact: a codec that allows it, timestamps in samples

    def out_samples(self, rate_out: int) -> int:
        """The samples the stream has at ``rate_out``."""
        return self.samples * rate_out // self.rate


def scan_audio(path: str) -> AudioIndex:
    """Read ``path``'s audio packets (decoding only the first frame, for where the samples
    start: codecs drop priming samples) for its rate, channels and length. ValueError naming
    the file when it has no audio stream, holds no sample, or is cut short (a packet that
    cannot be read, or less than its container promises)."""
    import av

    with open_container(path) as container:
        stream = first_stream(container, path, "audio")
        first: Any = None
        end = 0
        steps: list[int] = []
        read = Packets()
        try:
            for packet in container.demux(stream):
                if packet.size or packet.pts is not None:  # not the demuxer's closing one
                    read.add(packet, stream.time_base)
                if packet.pts is None or not packet.size:
                    continue
                step = int(packet.duration or 0) or (steps[-1] if steps else 0)
                steps.append(step)
                end = max(end, int(packet.pts) + step)
                if first is None:
                    first = next(iter(packet.decode()), None)
        except av.error.FFmpegError as error:
            raise ValueError(f"{path}: truncated or corrupt audio ({error})") from error
        if first is None:
            raise ValueError(f"{path}: its audio stream holds no sample")
        read.check_whole(path, container, stream, "frames")
        start = Fraction(first.pts or 0) * first.time_base
        rate, channels = int(first.sample_rate), len(first.layout.channels)
        stop = Fraction(end) * stream.time_base
        codec = stream.codec_context.name
        seekable = (codec in SEEK_EXACT_CODECS or codec.startswith("pcm_")) and (
            stream.time_base <= Fraction(1, rate)
        )
    samples = max(round((stop - start) * rate), first.samples)
    return AudioIndex(start, rate, channels, int(samples), seekable)


def load_or_scan_audio(path: str, cache_dir: str | None = None) -> AudioIndex:
    """``path``'s audio index, cached as ``load_or_scan``'s video index is."""
    numbers = cached_numbers(
        path,
        cache_dir,
        AUDIO_SUFFIX,
        _MAGIC,
        lambda: _numbers(scan_audio(path)),
        lambda numbers: len(numbers) == 6,
    )
    num, den, rate, channels, samples, seekable = (int(x) for x in numbers)
    return AudioIndex(Fraction(num, den), rate, channels, samples, bool(seekable))


def _numbers(index: AudioIndex) -> np.ndarray:
    fields = [index.start.numerator, index.start.denominator]
    numbers = [*fields, index.rate, index.channels, index.samples, int(index.seekable)]
    return np.array(numbers, dtype=np.int64)


def audio_window(
    path: str, index: AudioIndex, rate_out: int, mono: bool, first: int, count: int
) -> np.ndarray:
    """Samples ``first .. first + count - 1`` of the stream at ``rate_out`` (numbered from
    its first sample; zeros before it and past its end): float32, ``count`` long when
    ``mono`` (the channels' mean), else ``channels x count``."""
    lo, hi = source_span(index.rate, rate_out, first, count)
    source = decode_samples(path, index, lo, hi - lo)
    if mono and source.shape[0] > 1:
        source = source.mean(axis=0, keepdims=True, dtype=np.float64).astype(np.float32)
    out = resample(source, lo, index.rate, rate_out, first, count)
    return out[0] if mono else out


def decode_samples(path: str, index: AudioIndex, first: int, count: int) -> np.ndarray:
    """Source samples ``first .. first + count - 1`` (``channels x count`` float32), zeros
    outside the stream. A damaged file is a ClipDecodeError naming it and the time."""
    import av

    out = np.zeros((index.channels, count), dtype=np.float32)
    begin, stop = max(first, 0), min(first + count, index.samples)
    if begin >= stop:
        return out
    try:
        with open_container(path) as container:
            stream = first_stream(container, path, "audio")
            for at, samples in _placed_frames(container, stream, index, begin, path):
                if at >= stop:
                    break
                lo, hi = max(at, begin), min(at + samples.shape[1], stop)
                if lo < hi:
                    out[:, lo - first : hi - first] = samples[:, lo - at : hi - at]
    except av.error.FFmpegError as error:
        start, end = (float(index.start + Fraction(n, index.rate)) for n in (begin, stop))
        raise ClipDecodeError(
            f"{path}: the audio from {start:.3f} s to {end:.3f} s could not be decoded: the "
            f"file is truncated or damaged ({type(error).__name__}: {error})"
        ) from error
    return out


def _placed_frames(
    container: Any, stream: Any, index: AudioIndex, begin: int, path: str
) -> Iterator[tuple[int, np.ndarray]]:
    """(first sample, samples) of each decoded frame from a little before ``begin``: from a
    seek ``PREROLL_SECONDS`` earlier, retried from further back when it lands late, or from
    the stream's start."""
    back = int(PREROLL_SECONDS * index.rate)
    sought = False
    for _ in range(_SEEK_RETRIES if index.seekable else 0):
        target = begin - back
        if target <= 0:
            break
        seconds = index.start + Fraction(target, index.rate)
        container.seek(int(seconds / stream.time_base), backward=True, stream=stream)
        sought = True
        frames = _frames(container, stream)
        head = next(frames, None)
        if head is None or head.pts is None:
            break
        at = round((Fraction(head.pts) * head.time_base - index.start) * index.rate)
        if at <= begin - back // 2:
            yield from _contiguous(at, head, frames, index, path)
            return
        back *= 4
    if sought:
        container.seek(0, stream=stream)
    frames = _frames(container, stream)
    head = next(frames, None)
    if head is not None:
        yield from _contiguous(0, head, frames, index, path)


def _contiguous(
    at: int, head: Any, rest: Iterator[Any], index: AudioIndex, path: str
) -> Iterator[tuple[int, np.ndarray]]:
    for frame in _chain(head, rest):
        samples = as_float(frame, index.channels, path)
        yield at, samples
        at += samples.shape[1]


def _frames(container: Any, stream: Any) -> Iterator[Any]:
    for packet in container.demux(stream):
        yield from packet.decode()


def _chain(head: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield head
    yield from rest


def as_float(frame: Any, channels: int, path: str) -> np.ndarray:
    """A decoded audio frame as float32 ``channels x samples`` in [-1, 1)."""
    data = frame.to_ndarray()
    if not frame.format.is_planar:
        data = data.reshape(-1, len(frame.layout.channels)).T
    if data.shape[0] != channels:
        raise ClipDecodeError(
            f"{path}: an audio frame has {data.shape[0]} channels, its index {channels} "
            "(the file changed after it was indexed?)"
        )
    if data.dtype in _INT_SCALE:
        return (data / _INT_SCALE[data.dtype]).astype(np.float32)
    if data.dtype == np.uint8:
        return ((data.astype(np.float32) - 128) / 128).astype(np.float32)
    return data.astype(np.float32, copy=False)
