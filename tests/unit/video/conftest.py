"""The test videos, encoded once per session (see media.py)."""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest

from . import media

# HEVC: PyAV's wheel decodes it but has no encoder; this file was made by Debian's FFmpeg 5.1
# (libx265): ffmpeg -f lavfi -i testsrc2=size=64x48:rate=30 -frames:v 150 -c:v libx265
# -pix_fmt yuv420p -x265-params keyint=60:min-keyint=60:bframes=3:scenecut=0
# -preset veryfast -tag:v hvc1 hevc.mp4 (11 kB).
HEVC = pathlib.Path(__file__).parent / "data" / "hevc.mp4"


@pytest.fixture(scope="session", autouse=True)
def index_cache(tmp_path_factory):
    """The session's own cache directory for the indexes (the default, the user's cache
    directory, is left alone): ``$FLOWLOADER_CACHE``, which worker processes inherit."""
    folder = str(tmp_path_factory.mktemp("index-cache"))
    before = os.environ.get("FLOWLOADER_CACHE")
    os.environ["FLOWLOADER_CACHE"] = folder
    yield folder
    if before is None:
        del os.environ["FLOWLOADER_CACHE"]
    else:
        os.environ["FLOWLOADER_CACHE"] = before


@pytest.fixture(scope="session")
def videos(tmp_path_factory) -> dict[str, str]:
    """One file per kind: H.264 in MP4 and MKV, variable frame rate, VP9 in WebM, AV1 in
    MP4, HEVC in MP4 (a file of the repository's), H.264 with an audio track; 150 frames
    each, a keyframe every 60."""
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
    made = {name: media.encode(str(folder / name), **options) for name, options in kinds.items()}
    made["hevc.mp4"] = str(shutil.copy(HEVC, folder / "hevc.mp4"))
    return made
