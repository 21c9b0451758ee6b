"""The test videos, encoded once per session (see media.py)."""

from __future__ import annotations

import pytest

from . import media


@pytest.fixture(scope="session")
def videos(tmp_path_factory) -> dict[str, str]:
    """One file per kind: H.264 in MP4 and MKV, variable frame rate, VP9 in WebM, AV1 in
    MP4, H.264 with an audio track; 150 frames each, a keyframe every 60."""
    pytest.importorskip("av")
    folder = tmp_path_factory.mktemp("videos")
    kinds = {
        "h264.mp4": {},
        "h264.mkv": {},
        "vfr.mp4": {"variable_rate": True},
        "vp9.webm": {"codec": "libvpx-vp9"},
        "av1.mp4": {"codec": "libsvtav1"},
        "sound.mp4": {"audio": True},
    }
    return {name: media.encode(str(folder / name), **options) for name, options in kinds.items()}
