"""Video and audio clips as map-style datasets: frame-exact clips decoded only from the
keyframe they need, at the size the model wants, with a cached index per video; audio windows
resampled to one rate, sample-exact.

``pip install "flowloader[video]"`` brings PyAV (whose wheels carry FFmpeg); ``import
flowloader`` never imports it, and this package imports it only when a video is opened.
``docs/design/video.md`` has the design.
"""

from __future__ import annotations

from .audio import AudioIndex, load_or_scan_audio
from .audio_clips import AudioClips
from .clips import VideoClips
from .decode import ClipDecodeError
from .index import VideoIndex, load_or_scan
from .samplers import ClipSampler, UniformClipSampler

__all__ = [
    "AudioClips",
    "AudioIndex",
    "ClipDecodeError",
    "ClipSampler",
    "UniformClipSampler",
    "VideoClips",
    "VideoIndex",
    "load_or_scan",
    "load_or_scan_audio",
]
