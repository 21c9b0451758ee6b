"""Video clips as map-style datasets: frame-exact clips decoded only from the keyframe they
need, at the size the model wants, with a cached index per video.

``pip install "flowloader[video]"`` brings PyAV (whose wheels carry FFmpeg); ``import
flowloader`` never imports it, and this package imports it only when a video is opened.
``docs/design/video.md`` has the design.
"""

from __future__ import annotations

from .clips import VideoClips
from .decode import ClipDecodeError
from .index import VideoIndex, load_or_scan
from .samplers import ClipSampler, UniformClipSampler

__all__ = [
    "ClipDecodeError",
    "ClipSampler",
    "UniformClipSampler",
    "VideoClips",
    "VideoIndex",
    "load_or_scan",
]
