"""decoder="torchcodec": the same frames as PyAV's at full size (torchcodec given our index,
so no scan and no frame-rate guess), its own Resize otherwise; refused clearly where
torchcodec does not import."""

from __future__ import annotations

import re

import numpy as np
import pytest

import flowloader as fl

from . import media

av = pytest.importorskip("av")

from flowloader.video import VideoClips  # noqa: E402
from flowloader.video.decode_torchcodec import torchcodec_available  # noqa: E402

needs_torchcodec = pytest.mark.skipif(
    not torchcodec_available(), reason="torchcodec does not import here (needs torch, FFmpeg)"
)


@needs_torchcodec
@pytest.mark.parametrize(
    "kind", ["h264.mp4", "h264.mkv", "vfr.mp4", "vp9.webm", "av1.mp4", "hevc.mp4"]
)
def test_full_size_frames_are_pyav_sequential_decode(videos, kind) -> None:
    path = videos[kind]
    full = media.decode_all(path)
    ds = VideoClips(path, 8, frame_step=2, clip_stride=5, decoder="torchcodec")
    order = np.random.default_rng(2).permutation(len(ds)).tolist()
    for i, item in zip(order, ds.__getitems__(order), strict=True):
        _, start = ds.locate(i)
        assert np.array_equal(item["frames"], full[start : start + ds.span : 2]), (kind, i)


@needs_torchcodec
def test_resized_by_torchcodec_and_the_same_batches_for_any_workers(videos) -> None:
    path = videos["h264.mp4"]
    full = media.decode_all(path, (24, 40))
    ds = VideoClips(path, 4, size=(24, 40), decoder="torchcodec")
    item = ds[5]
    _, start = ds.locate(5)
    assert item["frames"].shape == (4, 24, 40, 3)
    # torchcodec's Resize is bilinear with antialiasing, not swscale's: close, not equal
    assert np.abs(item["frames"].astype(int) - full[start : start + 4]).mean() < 8
    runs = [[b["frames"] for b in fl.DataLoader(ds, batch_size=4, num_workers=w)] for w in (0, 2)]
    assert all(np.array_equal(a, b) for a, b in zip(*runs, strict=True))


@pytest.mark.skipif(torchcodec_available(), reason="torchcodec imports here")
def test_refused_clearly_without_torchcodec(videos) -> None:
    with pytest.raises(ValueError, match='decoder="torchcodec" needs torchcodec'):
        VideoClips(videos["h264.mp4"], 4, decoder="torchcodec")


@needs_torchcodec
def test_a_damaged_video_is_named_with_its_clips_and_frames(videos, tmp_path) -> None:
    """Where torchcodec's decoder fails on damaged data, the error names the file, the frames
    asked for with their times, and the clips holding them (whether FFmpeg reports the
    damage, rather than concealing it, is its decoder's)."""
    from .test_bad_files import damage, failures

    bad = damage(videos["h264.mp4"], str(tmp_path / "damaged.mp4"))
    ds = VideoClips(bad, 8, decoder="torchcodec")
    for i, error in failures(ds).items():
        message = str(error)
        assert message.startswith(f"{bad}: torchcodec could not decode "), message
        assert re.search(r"frames? .*\(.*\d\.\d{3} s", message), message
        assert message.endswith(f"in clip {i}"), message
