"""Decoding a video's clips with torchcodec (``VideoClips(decoder="torchcodec")``), for users
who have it and as the anchor to measure against.

The video's flowloader index is handed to torchcodec as its custom frame mappings (each
frame's timestamp, duration and keyframe flag), so torchcodec neither scans the file when it
opens (its exact mode's cost) nor guesses frames from a frame rate (its approximate mode's
error under variable frame rate), and its frame i is the index's frame i. The frames a
batch needs of one video are asked for at once, in time order: torchcodec decodes forward
from the keyframe each needs. Frames come back as uint8 RGB, resized by torchcodec's own
``Resize`` when a size is given.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from .decode import ClipDecodeError, Put, frames_text
from .index import VideoIndex


def frame_mappings(index: VideoIndex) -> str:
    """``index`` in the JSON form torchcodec reads as custom frame mappings (ffprobe's
    ``-show_frames`` output: pts, duration, key_frame)."""
    pts = index.pts.astype(np.int64)
    steps = np.diff(pts)
    last = int(steps.mean()) if len(steps) else 1
    durations = np.append(steps, last)
    keys = np.zeros(len(pts), dtype=np.int64)
    keys[index.keyframes] = 1
    frames = [
        {"pts": int(p), "duration": int(d), "key_frame": int(k)}
        for p, d, k in zip(pts, durations, keys, strict=True)
    ]
    return json.dumps({"frames": frames})


def decode_frames_torchcodec(
    path: str,
    index: VideoIndex,
    positions: Sequence[int],
    size: tuple[int, int] | None,
    threads: int,
    put: Put,
    mappings: str | None = None,
) -> None:
    """Decode the frames at ``positions`` of the video at ``path`` with torchcodec and hand
    each to ``put`` as ``H x W x 3`` uint8 RGB (at ``size`` = (height, width) when given),
    in ascending order."""
    from torchcodec.decoders import VideoDecoder

    wanted = sorted({int(p) for p in positions})
    transforms = None
    if size is not None and size != (index.height, index.width):
        from torchcodec.transforms import Resize

        transforms = [Resize(size=size)]
    try:
        decoder = VideoDecoder(
            path,
            dimension_order="NHWC",
            num_ffmpeg_threads=threads,
            custom_frame_mappings=mappings or frame_mappings(index),
            transforms=transforms,
        )
        frames = decoder.get_frames_at(wanted).data.numpy()
    except (RuntimeError, ValueError, IndexError) as error:
        raise ClipDecodeError(
            f"{path}: torchcodec could not decode {frames_text(index, wanted)}: {error}", wanted
        ) from error
    for position, frame in zip(wanted, frames, strict=True):
        put(position, frame)


def torchcodec_available() -> bool:
    """Whether torchcodec imports here (it needs torch and FFmpeg's shared libraries)."""
    try:
        import torchcodec.decoders  # noqa: F401
    except (ImportError, OSError, RuntimeError):
        return False
    return True
