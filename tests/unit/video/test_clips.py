"""VideoClips: frame-exact clips for every codec and container the tests can encode, the
index and its cache, clip arithmetic, and bad input named clearly."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from . import media

av = pytest.importorskip("av")

from flowloader.video import ClipDecodeError, VideoClips, decode, load_or_scan  # noqa: E402
from flowloader.video import index as video_index  # noqa: E402


def expected_clip(full: np.ndarray, ds: VideoClips, i: int) -> np.ndarray:
    _, start = ds.locate(i)
    return full[start : start + ds.span : ds.frame_step]


@pytest.mark.parametrize(
    "kind", ["h264.mp4", "h264.mkv", "vfr.mp4", "vp9.webm", "av1.mp4", "hevc.mp4"]
)
@pytest.mark.parametrize(("size", "threads"), [(None, 1), ((24, 40), 1), (None, 3)])
def test_every_clip_is_the_sequential_decode(videos, kind, size, threads) -> None:
    """Each clip's frames are bit-identical to those of a full decode of the file at the same
    conversion: clips read one at a time in a random order (a seek each) and all at once,
    with one decoding thread and with frame threads (frames nothing refers to, skipped
    packet by packet, must not shift)."""
    path = videos[kind]
    full = media.decode_all(path, size)
    ds = VideoClips(path, 8, frame_step=2, clip_stride=5, size=size, threads=threads)
    assert len(ds) == (150 - 15) // 5 + 1
    order = np.random.default_rng(1).permutation(len(ds)).tolist()
    for i in order[:8]:
        assert np.array_equal(ds[i]["frames"], expected_clip(full, ds, i)), (kind, i)
    for i, item in zip(order, ds.__getitems__(order), strict=True):
        assert item["frames"].shape == (8, *(size or (media.HEIGHT, media.WIDTH)), 3)
        assert np.array_equal(item["frames"], expected_clip(full, ds, i)), (kind, i)
    # the loader's path: every frame written once, in place, into the batch's array
    batch = ds.__getitems__(order, allocate=np.empty).collated()
    assert batch["frames"].shape == (len(order), 8, *(size or (media.HEIGHT, media.WIDTH)), 3)
    for k, i in enumerate(order):
        assert np.array_equal(batch["frames"][k], expected_clip(full, ds, i)), (kind, i)
        assert batch["video"][k] == 0


def test_timestamps_follow_a_variable_frame_rate(videos) -> None:
    ds = VideoClips(videos["vfr.mp4"], 4)
    with av.open(videos["vfr.mp4"]) as container:
        stream = container.streams.video[0]
        seconds = [float(f.pts * stream.time_base) for f in container.decode(stream)]
    steps = np.diff(seconds)
    assert steps.max() > 1.5 * steps.min()  # really variable
    for i in (0, 7, len(ds) - 1):
        _, start = ds.locate(i)
        np.testing.assert_allclose(ds[i]["pts"], seconds[start : start + 4])
        assert ds[i]["video"] == 0


def test_a_batch_of_videos_of_two_sizes_comes_as_a_list(videos, tmp_path) -> None:
    """Clips whose frames differ in size cannot share one array: the batch is a list."""
    small = media.encode(str(tmp_path / "small.mp4"), frames=40)
    media_size = (media.HEIGHT, media.WIDTH)
    same = VideoClips([small, videos["vp9.webm"]], 4)  # one size: one array
    assert not isinstance(same.__getitems__([0, len(same) - 1], allocate=np.empty), list)
    other = str(tmp_path / "other.mkv")
    with av.open(other, "w") as out:
        stream = out.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 32, 16, "yuv420p"
        for n in range(20):
            frame = av.VideoFrame.from_ndarray(np.full((16, 32, 3), n, np.uint8), format="rgb24")
            out.mux(stream.encode(frame))
        out.mux(stream.encode())
    mixed = VideoClips([small, other], 4)
    items = mixed.__getitems__([0, len(mixed) - 1], allocate=np.empty)
    assert isinstance(items, list)
    assert [item["frames"].shape for item in items] == [(4, *media_size, 3), (4, 16, 32, 3)]


def test_clips_span_several_videos_in_order(videos) -> None:
    paths = [videos["h264.mp4"], videos["vp9.webm"]]
    ds = VideoClips(paths, 16)  # 150 frames: 9 clips each, not overlapping
    assert len(ds) == 18
    assert ds.locate(8) == (0, 128)
    assert ds.locate(9) == (1, 0)
    assert ds.locate(-1) == (1, 128)
    assert [item["video"] for item in ds.__getitems__([17, 0, 9])] == [1, 0, 1]
    with pytest.raises(IndexError, match="clip 18 is out of range for 18 clips"):
        ds[18]


def test_the_index_is_cached_in_the_users_cache_and_rescanned_when_the_video_changes(
    videos, tmp_path, monkeypatch, index_cache
) -> None:
    path = str(tmp_path / "clip.mp4")
    shutil.copy(videos["h264.mp4"], path)
    index = load_or_scan(path)
    assert os.listdir(tmp_path) == ["clip.mp4"]  # nothing beside the video
    cached = video_index.index_path(path)
    assert os.path.dirname(cached) == os.path.join(index_cache, "video")
    assert os.path.exists(cached)
    assert index.frames == 150
    assert index.keyframes.tolist() == [0, 60, 120]

    def no_scan(path: str) -> None:
        raise AssertionError("scanned again")

    with monkeypatch.context() as patched:
        patched.setattr(video_index, "scan", no_scan)
        assert load_or_scan(path).pts.tolist() == index.pts.tolist()
        os.utime(path, ns=(1, 1))  # touched, same content: the digest still matches
        assert load_or_scan(path).frames == 150
    media.encode(path, frames=90)  # rewritten
    assert load_or_scan(path).frames == 90


def test_a_cache_directory_keeps_the_index_when_given(videos, tmp_path) -> None:
    cache = tmp_path / "cache"
    VideoClips(videos["h264.mkv"], 4, cache_dir=str(cache))
    assert [name.endswith(video_index.SUFFIX) for name in os.listdir(cache)] == [True]


def test_bad_input_is_named(videos, tmp_path) -> None:
    text = tmp_path / "notes.mp4"
    text.write_text("not a video at all\n" * 50)
    with pytest.raises(ValueError, match=r"notes\.mp4: not a video or audio file FFmpeg can read"):
        VideoClips(str(text), 4)
    sound = media.encode_audio_only(str(tmp_path / "sound.m4a"))
    with pytest.raises(ValueError, match=r"sound\.m4a: has no video stream \(its streams: audio\)"):
        VideoClips(sound, 4)
    truncated = tmp_path / "cut.mp4"
    with open(videos["h264.mp4"], "rb") as whole:
        data = whole.read()
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"cut\.mp4"):
        VideoClips(str(truncated), 4)
    with pytest.raises(ValueError, match=r"h264\.mp4: 150 frames, too short for one clip of 151"):
        VideoClips(videos["h264.mp4"], 76, frame_step=2)
    with pytest.raises(FileNotFoundError, match=r"missing\.mp4"):
        VideoClips(str(tmp_path / "missing.mp4"), 4)
    for bad in ({"clip_len": 0}, {"clip_len": 4, "frame_step": -1}, {"clip_len": 2.5}):
        with pytest.raises(ValueError, match="should be a positive integer"):
            VideoClips(videos["h264.mp4"], **bad)
    with pytest.raises(ValueError, match="decoder should be one of"):
        VideoClips(videos["h264.mp4"], 4, decoder="gpu")
    with pytest.raises(ValueError, match=r"size should be \(height, width\)"):
        VideoClips(videos["h264.mp4"], 4, size=(0, 10))


def test_a_video_changed_after_the_dataset_was_made_is_refused(videos, tmp_path) -> None:
    path = str(tmp_path / "moving.mp4")
    shutil.copy(videos["h264.mp4"], path)
    ds = VideoClips(path, 10)
    media.encode(path, frames=100)
    with pytest.raises(ValueError, match=r"moving\.mp4: 100 frames now, 150 when the dataset"):
        ds[0]
    stale = VideoClips(videos["h264.mkv"], 10)
    stale.remembered("video", 0, lambda: load_or_scan(path))  # an index of another file
    with pytest.raises(ClipDecodeError, match=r"h264\.mkv"):
        stale[3]


def test_nothing_stays_open(videos) -> None:
    ds = VideoClips([videos["h264.mp4"], videos["vp9.webm"]], 8)
    before = set(os.listdir("/proc/self/fd"))
    ds.__getitems__(list(range(len(ds))))
    with pytest.raises(IndexError):
        ds[10**6]
    assert set(os.listdir("/proc/self/fd")) == before


def test_a_dataset_pickles_without_its_indexes(videos) -> None:
    import pickle

    ds = VideoClips(videos["h264.mp4"], 8)
    ds[0]
    assert ds._kept
    copy = pickle.loads(pickle.dumps(ds))
    assert not copy._kept
    assert np.array_equal(copy[5]["frames"], ds[5]["frames"])


def test_frames_nothing_refers_to_are_not_decoded(videos) -> None:
    """Reading the whole stream while needing two frames decodes fewer frames than it holds
    (the B-frames nothing refers to are skipped), and still yields the two. (VP9 as libvpx
    encodes it, and HEVC as x265 does here, mark every frame referenced: nothing to skip.)"""
    path = videos["h264.mp4"]
    index = load_or_scan(path)
    needed = {int(index.pts[0]), int(index.pts[100])}
    with av.open(path) as container:
        stream = container.streams.video[0]
        got = [frame.pts for frame in decode._decoded(container, stream, needed)]
    assert needed <= set(got)
    assert len(got) < index.frames
