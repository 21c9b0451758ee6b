"""What VideoClips and AudioClips are given, as a new user gives it: a folder or a glob of
files, ``size=224``; and where their indexes go (never where a glob of the videos finds
them)."""

from __future__ import annotations

import glob
import os
import shutil
import warnings

import numpy as np
import pytest

import flowloader as fl

from . import media

av = pytest.importorskip("av")

from flowloader.video import AudioClips, VideoClips, load_or_scan  # noqa: E402
from flowloader.video import index as video_index  # noqa: E402


@pytest.fixture
def folder(videos, tmp_path) -> str:
    """videos/ with two videos at the top, one in a subfolder, a camera's upper-case
    suffix, a text file, and index files an earlier version wrote beside the videos."""
    root = tmp_path / "videos"
    (root / "b").mkdir(parents=True)
    shutil.copy(videos["h264.mp4"], root / "2.mp4")
    shutil.copy(videos["vp9.webm"], root / "1.webm")
    shutil.copy(videos["h264.mkv"], root / "b" / "3.MKV")
    (root / "notes.txt").write_text("not a video")
    (root / ("2.mp4" + video_index.SUFFIX)).write_bytes(b"an index of an earlier version")
    return str(root)


def test_a_folder_gives_its_videos_sorted_recursively(folder) -> None:
    ds = VideoClips(folder, 8)
    names = [os.path.relpath(path, folder) for path in ds.paths]
    assert names == ["1.webm", "2.mp4", os.path.join("b", "3.MKV")]
    assert len(ds) == 3 * (150 // 8)
    assert ds.path(len(ds) - 1) == os.path.join(folder, "b", "3.MKV")
    written = ["1.webm", "2.mp4", "2.mp4" + video_index.SUFFIX, "b", "notes.txt"]
    assert sorted(os.listdir(folder)) == written  # nothing was written there


def test_a_glob_gives_its_files_sorted_without_index_files(folder) -> None:
    """``videos/*`` matches the old index file beside 2.mp4 (not a video) and the text
    file; the index file is left out, the text file is the user's to leave out."""
    ds = VideoClips(os.path.join(folder, "*.*[!t]"), 8)
    assert [os.path.basename(path) for path in ds.paths] == ["1.webm", "2.mp4"]
    listed = VideoClips([os.path.join(folder, "b", "*"), os.path.join(folder, "2.mp4")], 8)
    assert [os.path.basename(path) for path in listed.paths] == ["3.MKV", "2.mp4"]
    recursive = VideoClips(os.path.join(folder, "**", "*.[mM]*"), 8)
    assert [os.path.basename(path) for path in recursive.paths] == ["2.mp4", "3.MKV"]


def test_what_names_no_video_is_refused_naming_it(folder, tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match=r"missing\.mp4: no such file or folder"):
        VideoClips(os.path.join(folder, "missing.mp4"), 8)
    with pytest.raises(FileNotFoundError, match=r"\*\.avi: no video files match"):
        VideoClips(os.path.join(folder, "*.avi"), 8)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"empty: no video files there \(by suffix: .mp4"):
        VideoClips(str(tmp_path / "empty"), 8)
    with pytest.raises(ValueError, match="no video file given: the list is empty"):
        VideoClips([], 8)
    with pytest.raises(FileNotFoundError, match=r"videos: no audio files there"):
        AudioClips(folder, 0.5, sample_rate=16000)


def test_audio_clips_take_a_folder_and_a_glob(tmp_path) -> None:
    root = tmp_path / "sounds"
    root.mkdir()
    media.encode_sound(str(root / "b.flac"), "flac", seconds=1.0)
    media.encode_sound(str(root / "a.WAV"), "pcm_s16le", seconds=1.0)
    media.encode(str(root / "c.mp4"), 30, audio=True)  # a video: not an audio file by suffix
    ds = AudioClips(str(root), 0.5, sample_rate=16000)
    assert [os.path.basename(path) for path in ds.paths] == ["a.WAV", "b.flac"]
    assert [ds.path(0), ds.path(3)] == ds.paths
    tracks = AudioClips(str(root / "*.mp4"), 0.5, sample_rate=16000)  # a video's track
    assert [os.path.basename(path) for path in tracks.paths] == ["c.mp4"]


def test_size_224_is_224_by_224_and_clips_of_two_shapes_stack(videos, tmp_path) -> None:
    other = str(tmp_path / "other.mkv")
    with av.open(other, "w") as out:
        stream = out.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 32, 16, "yuv420p"
        for n in range(20):
            frame = av.VideoFrame.from_ndarray(np.full((16, 32, 3), n, np.uint8), format="rgb24")
            out.mux(stream.encode(frame))
        out.mux(stream.encode())
    ds = VideoClips([videos["h264.mp4"], other], 4, size=24)
    assert ds.size == (24, 24)
    assert np.array_equal(ds[0]["frames"], media.decode_all(videos["h264.mp4"], (24, 24))[:4])
    batches = list(fl.DataLoader(ds, batch_size=len(ds)))
    assert batches[0]["frames"].shape == (len(ds), 4, 24, 24, 3)  # one array, both shapes
    assert set(batches[0]["video"].tolist()) == {0, 1}
    assert VideoClips(other, 4, size=np.int64(8)).size == (8, 8)
    assert VideoClips(other, 4, size=[16, 8]).size == (16, 8)
    for bad in (0, True, (24,), (24, 24, 3), (24.5, 24), "224"):
        with pytest.raises(ValueError, match=r"size should be \(height, width\) in pixels, or an"):
            VideoClips(other, 4, size=bad)


def test_indexes_go_to_the_users_cache_directory(videos, tmp_path, monkeypatch) -> None:
    """$FLOWLOADER_CACHE, else $XDG_CACHE_HOME/flowloader, else ~/.cache/flowloader; under
    video/; nothing is written beside the videos, so a glob of them finds only them."""
    root = tmp_path / "videos"
    root.mkdir()
    path = str(shutil.copy(videos["h264.mp4"], root / "a.mp4"))
    monkeypatch.delenv("FLOWLOADER_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    VideoClips(path, 4, audio=False)
    AudioClips(videos["sound.mp4"], 0.5, sample_rate=16000)
    assert glob.glob(str(root / "*")) == [path]
    cached = sorted(os.listdir(tmp_path / "xdg" / "flowloader" / "video"))
    assert [name.split(".")[0] for name in cached] == ["a", "sound"]
    assert video_index.index_path(path).startswith(str(tmp_path / "xdg" / "flowloader" / "video"))
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert video_index.default_cache_dir() == str(
        tmp_path / "home" / ".cache" / "flowloader" / "video"
    )
    given = tmp_path / "given"
    VideoClips(path, 4, cache_dir=given)  # a path-like cache_dir
    assert [name.startswith("a.mp4.") for name in os.listdir(given)] == [True]


def test_a_cache_that_cannot_be_written_is_warned_about_once(videos, tmp_path, monkeypatch) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv("FLOWLOADER_CACHE", str(blocked))
    with pytest.warns(UserWarning, match=r"cannot cache video and audio indexes in .*blocked"):
        ds = VideoClips(videos["h264.mp4"], 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per folder
        assert load_or_scan(videos["h264.mp4"]).frames == 150  # scanned again
        assert np.array_equal(ds[3]["frames"], media.decode_all(videos["h264.mp4"])[24:32])
