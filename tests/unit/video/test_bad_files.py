"""Damaged and cut-short files, for real: a damaged video or audio file fails naming the file,
the clip (or window) and the frame (or time), and skip_errors records its path; a file whose
container promises more than its packets hold is refused when it is indexed, naming it, and
an index an earlier version cached is scanned again."""

from __future__ import annotations

import os
import re
import shutil

import numpy as np
import pytest

import flowloader as fl

from . import media

av = pytest.importorskip("av")

from flowloader.video import AudioClips, ClipDecodeError, VideoClips, load_or_scan  # noqa: E402
from flowloader.video import index as video_index  # noqa: E402
from flowloader.video.decode import frames_text  # noqa: E402


def damage(source: str, target: str, at: float = 1 / 3) -> str:
    """A copy of ``source`` whose bytes from ``at`` of the way in are flipped (3000 bytes,
    one in three): the container intact, packets' data damaged (bit rot)."""
    with open(source, "rb") as whole:
        data = bytearray(whole.read())
    start = int(len(data) * at)
    for k in range(start, start + 3000, 3):
        data[k] ^= 0x5A
    with open(target, "wb") as out:
        out.write(bytes(data))
    return target


def cut(source: str, target: str, length: int) -> str:
    with open(source, "rb") as whole, open(target, "wb") as out:
        out.write(whole.read()[:length])
    return target


def faststart(path: str, frames: int = 300) -> str:
    """An H.264 MP4 with its index at the front (``movflags=faststart``), as web video is."""
    with av.open(path, "w", options={"movflags": "faststart"}) as out:
        stream = out.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 160, 120, "yuv420p"
        for n in range(frames):
            image = np.full((120, 160, 3), n % 256, np.uint8)
            image[:, (n * 3) % 160] = 255
            out.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        out.mux(stream.encode())
    return path


@pytest.fixture
def damaged(videos, tmp_path) -> tuple[str, str]:
    good = str(shutil.copy(videos["h264.mp4"], tmp_path / "good.mp4"))
    return good, damage(good, str(tmp_path / "damaged.mp4"))


def check_named(message: str, ds: VideoClips, path: str) -> None:
    """The message names ``path``, a frame with its time, and clips that hold that frame."""
    assert message.startswith(f"{path}: "), message
    found = re.search(r"frame (\d+) \(at (\d+\.\d{3}) s\) could not be decoded", message)
    assert found is not None, message
    frame = int(found[1])
    clips = re.search(r"in clips? ([\d, ]+)", message)
    assert clips is not None, message
    for clip in (int(c) for c in clips[1].split(",")):
        _, start = ds.locate(clip)
        assert ds.path(clip) == path
        assert frame in range(start, start + ds.span, ds.frame_step)
    index = load_or_scan(path)
    assert float(found[2]) == pytest.approx(index.seconds(np.array([frame]))[0], abs=1e-3)


def failures(ds: VideoClips | AudioClips) -> dict[int, ClipDecodeError]:
    """The items of ``ds`` that fail to decode, with their errors."""
    failed = {}
    for i in range(len(ds)):
        try:
            ds[i]
        except ClipDecodeError as error:
            failed[i] = error
    return failed


def test_a_damaged_video_names_the_file_the_clip_and_the_frame(damaged) -> None:
    good, bad = damaged
    ds = VideoClips([good, bad], 8)
    assert [ds.path(0), ds.path(len(ds) - 1)] == [good, bad]
    failed = failures(ds)
    assert failed
    for i, error in failed.items():
        assert ds.path(i) == bad
        check_named(str(error), ds, bad)
        assert re.search(rf"in clips? (\d+, )*{i}\b", str(error))
        assert isinstance(error.__cause__.__cause__, av.error.FFmpegError)  # FFmpeg's own
    # a batch, decoded into the loader's array: the clips holding the frame are named
    with pytest.raises(ClipDecodeError) as raised:
        ds.__getitems__(list(range(len(ds))), allocate=np.empty)
    check_named(str(raised.value), ds, bad)
    with pytest.raises(ClipDecodeError, match=re.escape(bad)):
        for _ in fl.DataLoader(ds, batch_size=4):
            pass
    # clips one frame apart: the frame is in eight of them, five named and a count
    overlapping = VideoClips(bad, 8, clip_stride=1)
    with pytest.raises(ClipDecodeError, match=r"in clips (\d+, ){4}\d+ and 3 more$") as raised:
        overlapping.__getitems__(list(range(len(overlapping))), allocate=np.empty)
    check_named(str(raised.value), overlapping, bad)


def test_frames_are_named_with_their_times(videos) -> None:
    index = load_or_scan(videos["h264.mp4"])  # 30 frames a second
    assert frames_text(index, [30]) == "frame 30 (at 1.000 s)"
    assert frames_text(index, [45, 3, 30, 3]) == "3 frames from 3 to 45 (0.100 s to 1.500 s)"


@pytest.mark.parametrize("workers", [0, 2])
def test_skip_errors_records_the_damaged_videos_path(damaged, workers) -> None:
    good, bad = damaged
    ds = VideoClips([good, bad], 8)
    loader = fl.DataLoader(ds, batch_size=4, num_workers=workers, skip_errors=ClipDecodeError)
    it = iter(loader)
    with pytest.warns(fl.errors.SkippedSampleWarning, match="damaged.mp4"):
        videos = np.concatenate([batch["video"] for batch in it])
    skipped = it.stats().skipped
    assert skipped
    assert {record.path for record in skipped} == {bad}
    assert all(ds.path(record.index) == bad for record in skipped)
    assert len(videos) + len(skipped) == len(ds)
    assert (videos == 0).sum() == ds.clips_per_video[0]  # every clip of the good video


def test_a_damaged_audio_file_names_the_file_the_window_and_the_time(tmp_path) -> None:
    good = media.encode_sound(str(tmp_path / "good.m4a"), "aac", seconds=4.0)
    bad = damage(good, str(tmp_path / "damaged.m4a"))
    ds = AudioClips([good, bad], 0.5, sample_rate=16000)
    assert [ds.path(0), ds.path(len(ds) - 1)] == [good, bad]
    failed = failures(ds)
    assert failed
    for i, error in failed.items():
        assert ds.path(i) == bad
        found = re.fullmatch(
            re.escape(bad) + r": the audio from (\d+\.\d+) s to (\d+\.\d+) s could not be "
            r"decoded: the file is truncated or damaged \(InvalidDataError: .*\), in window "
            + str(i),
            str(error),
        )
        assert found is not None, str(error)
        start = ds.locate(i)[1] / 16000  # the window's time; the audio named covers it
        assert float(found[1]) <= start + 0.001
        assert float(found[2]) >= start + 0.499


def test_a_faststart_mp4_cut_short_is_refused_when_indexed(tmp_path) -> None:
    """The review's N2: the container at the front promises 300 frames; cut in half, the
    file's packets hold fewer, the last of them read short."""
    full = faststart(str(tmp_path / "full.mp4"))
    assert VideoClips(full, 16).lengths.tolist() == [300]
    size = os.path.getsize(full)
    half = cut(full, str(tmp_path / "cut.mp4"), size // 2)
    with pytest.raises(ValueError, match=r"cut\.mp4: cut short or damaged .*last video packet"):
        VideoClips(half, clip_len=16)
    # cut where a packet ends: no packet read short, but fewer than the container's count
    with av.open(full) as container:
        ends = [p.pos + p.size for p in container.demux(video=0) if p.size]
    boundary = cut(full, str(tmp_path / "boundary.mp4"), ends[len(ends) // 2])
    with pytest.raises(
        ValueError, match=r"boundary\.mp4: .*container promises 300 video frames, its packets hold"
    ):
        VideoClips(boundary, clip_len=16)


@pytest.mark.parametrize(
    ("name", "codec"), [("a.flac", "flac"), ("a.mp3", "libmp3lame"), ("a.wav", "pcm_s16le")]
)
def test_a_cut_audio_file_is_refused_when_indexed(tmp_path, name, codec) -> None:
    """Where the container counts no packets: the stream's duration (FLAC, MP3's Xing
    header), or a last packet read short (WAV)."""
    whole = media.encode_sound(str(tmp_path / name), codec)
    part = cut(whole, str(tmp_path / f"short-{name}"), os.path.getsize(whole) * 2 // 3)
    with pytest.raises(ValueError, match=rf"short-{re.escape(name)}: cut short or damaged"):
        AudioClips(part, 0.5, sample_rate=16000)
    assert len(AudioClips(whole, 0.5, sample_rate=16000)) == 6  # the whole file is accepted


def test_a_cut_mkv_is_refused_when_indexed(videos, tmp_path) -> None:
    """A file of one stream: the file's duration."""
    mkv = videos["h264.mkv"]
    short = cut(mkv, str(tmp_path / "short.mkv"), os.path.getsize(mkv) * 2 // 3)
    with pytest.raises(ValueError, match=r"short\.mkv: .*lasts until 5\.000 s, its packets end"):
        VideoClips(short, 4)


def test_an_index_an_earlier_version_cached_is_scanned_again(tmp_path, monkeypatch) -> None:
    """A cut file an earlier version indexed (its scan did not count packets) is refused now:
    the cached index's format version differs, so the file is scanned again."""
    full = faststart(str(tmp_path / "full.mp4"), frames=120)
    half = cut(full, str(tmp_path / "cut.mp4"), os.path.getsize(full) // 2)
    with monkeypatch.context() as earlier:
        earlier.setattr(video_index, "_VERSION", 2)
        earlier.setattr(video_index.Packets, "check_whole", lambda *args: None)
        frames = load_or_scan(half).frames
    assert 0 < frames < 120
    cached = np.fromfile(video_index.index_path(half), dtype=np.int64)
    assert cached[1] == 2  # version 2, matching the file
    with pytest.raises(ValueError, match=r"cut\.mp4: cut short or damaged"):
        load_or_scan(half)
