"""Decoding a video's clips with PyAV: from the keyframe each needs, forward, no further.

A batch's clips of one video are decoded together from one open container, in time order:
the frames they need (their union) are visited once, ascending; the decoder seeks only when
the next needed frame lies past a keyframe it has not reached (a jump is then cheaper than
decoding the gap), and never backward. Frames not needed that no other frame refers to
(most B-frames) are not decoded at all. Each needed frame is converted once (FFmpeg's
swscale: pixel format and size in one pass) and handed to every clip holding it.

A frame is known by its timestamp: a decoded frame whose timestamp the index does not hold,
or a needed frame the decoder passes or never reaches, means the file is not the one indexed,
and is refused with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from .index import VideoIndex, first_stream, open_container

# Decoders whose skip_frame = NONREF, set packet by packet, skips exactly the frames nothing
# refers to (tested: the clips stay bit-identical, one thread and frame threads). libdav1d's
# AV1 decoder is not among them: it decodes packets some way ahead of what it returns, so a
# packet's setting lands wrong.
SKIPS_UNREFERENCED = frozenset({"h264", "hevc", "vp9"})

# Seeks to an earlier keyframe before giving up on a seek that lands past the frame wanted.
_SEEK_RETRIES = 3


class ClipDecodeError(ValueError):
    """A clip could not be decoded as its video's index describes it, or FFmpeg failed to
    decode it (a damaged file): the message names the file, the frame (and its time) and,
    from ``VideoClips``, the clip; ``frames`` holds the frames' positions in the video."""

    def __init__(self, message: str, frames: Sequence[int] = ()) -> None:
        super().__init__(message)
        self.frames = tuple(frames)


# put(position, frame): a decoded frame (H x W x 3 uint8 RGB), valid during the call only.
Put = Callable[[int, np.ndarray], None]


def decode_frames(
    path: str,
    index: VideoIndex,
    positions: Sequence[int],
    size: tuple[int, int] | None,
    threads: int,
    put: Put,
) -> None:
    """Decode the frames at ``positions`` (into ``index.pts``) of the video at ``path`` and
    hand each to ``put`` as ``H x W x 3`` uint8 RGB (at ``size`` = (height, width) when
    given), in ascending order: a view of the converted frame's buffer, which ``put`` copies
    where it belongs (into the batch, in place)."""
    import av
    from av.video.reformatter import VideoReformatter

    wanted = sorted({int(p) for p in positions})
    needed = {int(t) for t in index.pts[wanted]}
    height, width = size if size is not None else (index.height, index.width)
    convert = VideoReformatter()  # one swscale context for every frame, not one each
    done: set[int] = set()
    with open_container(path) as container:
        stream = first_stream(container, path, "video")
        stream.codec_context.thread_count = threads
        stream.codec_context.thread_type = "FRAME" if threads > 1 else "SLICE"
        frames: Iterator[Any] | None = None
        at = -1  # the position of the frame decoded last
        for position in wanted:
            try:
                keyframe = index.keyframe_before(position)
                if frames is None or keyframe > at + 1:
                    frames, at = _seek(container, stream, index, keyframe, position, path, needed)
                while at < position:
                    frame = next(frames, None)
                    if frame is None:
                        raise ClipDecodeError(
                            f"{path}: the decoder ended before frame {position} (its index has "
                            f"{index.frames} frames: the file changed after it was indexed?)"
                        )
                    at = _position_of(index, frame, path)
                    if at == position:
                        rgb = convert.reformat(
                            frame,
                            format="rgb24",
                            width=width,
                            height=height,
                            interpolation="BILINEAR",
                        )
                        put(position, _pixels(rgb))
                        done.add(position)
                if position not in done:
                    raise ClipDecodeError(
                        f"{path}: frame {position} (timestamp {int(index.pts[position])}) was "
                        "not decoded: the file differs from its index"
                    )
            except ClipDecodeError as error:
                error.frames = error.frames or (position,)
                raise
            except av.error.FFmpegError as error:  # a damaged packet: FFmpeg's bare message
                raise ClipDecodeError(
                    f"{path}: {frames_text(index, [position])} could not be decoded: the file "
                    f"is damaged ({type(error).__name__}: {error})",
                    (position,),
                ) from error


def _pixels(rgb: Any) -> np.ndarray:
    """An RGB frame's pixels as an ``H x W x 3`` view of its buffer (rows padded to the
    plane's line size are cut to the width)."""
    plane = rgb.planes[0]
    rows = np.frombuffer(plane, np.uint8).reshape(plane.height, plane.line_size)
    return rows[:, : plane.width * 3].reshape(plane.height, plane.width, 3)


def _seek(
    container: Any,
    stream: Any,
    index: VideoIndex,
    keyframe: int,
    position: int,
    path: str,
    needed: set[int],
) -> tuple[Iterator[Any], int]:
    """Seek to ``keyframe`` and return the decoder's frames from there, with the position
    just before the first of them. A seek that lands past ``position`` (a demuxer that seeks
    by decoding time) is done again from an earlier keyframe."""
    keys = index.keyframes
    k = int(np.searchsorted(keys, keyframe))
    for _ in range(_SEEK_RETRIES):
        target = int(index.pts[keyframe])
        container.seek(target, backward=True, any_frame=False, stream=stream)
        frames = _decoded(container, stream, needed)
        first = next(frames, None)
        if first is None:
            break
        at = _position_of(index, first, path)
        if at <= position:
            return _chain(first, frames), at - 1
        k = max(k - 1, 0)
        keyframe = int(keys[k]) if len(keys) else 0
    raise ClipDecodeError(
        f"{path}: no seek reached frame {position} (its keyframes do not match the index: "
        "the file changed after it was indexed?)"
    )


def _decoded(container: Any, stream: Any, needed: set[int]) -> Iterator[Any]:
    """The decoder's frames, from packets demuxed on. A packet of a frame not ``needed``
    (by timestamp) is decoded only if other frames refer to it (FFmpeg's ``skip_frame =
    NONREF``, for the decoders in ``SKIPS_UNREFERENCED``): the frames between a keyframe and
    a clip, and those a frame step leaves out, cost nothing when nothing refers to them."""
    context = stream.codec_context
    skipping, can_skip = False, context.name in SKIPS_UNREFERENCED
    for packet in container.demux(stream):
        skip = can_skip and packet.pts is not None and int(packet.pts) not in needed
        if skip != skipping:
            context.skip_frame = "NONREF" if skip else "DEFAULT"
            skipping = skip
        yield from packet.decode()


def frames_text(index: VideoIndex, frames: Sequence[int]) -> str:
    """Frames named for a message, with their times: "frame 7 (at 0.233 s)", or "12 frames
    from 3 to 40 (0.100 s to 1.333 s)"."""
    lo, hi = min(frames), max(frames)
    t_lo, t_hi = (float(t) for t in index.seconds(np.array([lo, hi])))
    if lo == hi:
        return f"frame {lo} (at {t_lo:.3f} s)"
    return f"{len(set(frames))} frames from {lo} to {hi} ({t_lo:.3f} s to {t_hi:.3f} s)"


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def _position_of(index: VideoIndex, frame: Any, path: str) -> int:
    """The index position of a decoded frame, found by its timestamp."""
    pts = frame.pts
    at = int(np.searchsorted(index.pts, pts)) if pts is not None else len(index.pts)
    if at >= len(index.pts) or index.pts[at] != pts:
        raise ClipDecodeError(
            f"{path}: decoded a frame at timestamp {pts}, which its index does not hold "
            "(the file changed after it was indexed?)"
        )
    return at
