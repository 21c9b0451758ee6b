"""Audio: AudioClips' windows and VideoClips' audio are exactly the whole file decoded and
resampled, for every codec the tests can encode; the resampler is right; bad input named."""

from __future__ import annotations

import os

import numpy as np
import pytest

import flowloader as fl

from . import media

av = pytest.importorskip("av")

from flowloader.video import AudioClips, ClipSampler, VideoClips, load_or_scan_audio  # noqa: E402
from flowloader.video.audio import AUDIO_SUFFIX, audio_window, decode_samples  # noqa: E402
from flowloader.video.index import index_path  # noqa: E402
from flowloader.video.resample import resample, source_span  # noqa: E402

SOUNDS = {
    "pcm.wav": {"codec": "pcm_s16le"},
    "flac.flac": {"codec": "flac"},
    "aac.m4a": {"codec": "aac"},
    "mp3.mp3": {"codec": "libmp3lame"},
    "opus.webm": {"codec": "libopus", "rate": 48000},
    "mono.wav": {"codec": "pcm_s16le", "rate": 22050, "layout": "mono"},
}


# AAC's noise substitution draws from a generator that a seek starts afresh: its windows are
# the whole decode's to within that noise, not bit for bit.
NOISY = {"aac.m4a": 1e-4}


def assert_same(got: np.ndarray, expected: np.ndarray, kind: str, where: object) -> None:
    if kind in NOISY:
        np.testing.assert_allclose(got, expected, atol=NOISY[kind], err_msg=f"{kind} {where}")
    else:
        assert np.array_equal(got, expected), (kind, where)


@pytest.fixture(scope="module")
def sounds(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("sounds")
    return {name: media.encode_sound(str(folder / name), **kw) for name, kw in SOUNDS.items()}


@pytest.mark.parametrize("kind", list(SOUNDS))
def test_the_decoded_samples_are_a_sequential_decode(sounds, kind) -> None:
    """At the file's own rate the samples are those of decoding every frame in order: read
    whole and from windows that seek (a preroll drops what codecs decode wrongly after a
    seek; Opus, whose seeks are not sample-exact, decodes from the start); a window decodes
    the same every time."""
    path = sounds[kind]
    full = media.decode_sound(path)
    index = load_or_scan_audio(path)
    assert index.channels == full.shape[0]
    assert abs(index.samples - full.shape[1]) < 2400  # the codecs' padding at the end
    got = decode_samples(path, index, 0, index.samples)
    shared = min(index.samples, full.shape[1])
    assert np.array_equal(got[:, :shared], full[:, :shared])
    for first in (1, 777, index.samples // 2 + 13, index.samples - 3000):
        window = decode_samples(path, index, first, 2000)
        assert_same(window, got[:, first : first + 2000], kind, first)
        assert np.array_equal(window, decode_samples(path, index, first, 2000))


@pytest.mark.parametrize("kind", list(SOUNDS))
@pytest.mark.parametrize(("rate", "mono"), [(16000, True), (48000, False)])
def test_every_window_is_the_whole_file_resampled(sounds, kind, rate, mono) -> None:
    """A window cut anywhere is bit-identical to the same samples of the whole file
    resampled at once."""
    path = sounds[kind]
    ds = AudioClips(path, 0.25, sample_rate=rate, mono=mono, clip_stride=0.1)
    index = load_or_scan_audio(path)
    whole = audio_window(path, index, rate, mono, 0, index.out_samples(rate))
    assert len(ds) == (index.out_samples(rate) - ds.clip_samples) // ds.stride_samples + 1
    for i in sorted({0, 1, len(ds) // 2, len(ds) - 1, *range(3, len(ds), 7)}):
        item = ds[i]
        first = i * ds.stride_samples
        assert item["audio"].dtype == np.float32
        assert item["audio"].shape == (
            (ds.clip_samples,) if mono else (index.channels, ds.clip_samples)
        )
        assert_same(item["audio"], whole[..., first : first + ds.clip_samples], kind, i)
        assert item["start"] == pytest.approx(first / rate)
        assert item["file"] == 0


def test_the_resampler_keeps_a_tone_and_a_constant() -> None:
    """44.1 kHz to 16 kHz and 8 kHz to 16 kHz: a 440 Hz tone comes out as the same tone at
    the new sample times, a constant stays constant."""
    for rate_in, rate_out in ((44100, 16000), (8000, 16000), (48000, 44100)):
        t = np.arange(rate_in) / rate_in
        source = np.stack([np.sin(2 * np.pi * 440 * t), np.full(rate_in, 0.5)]).astype(np.float32)
        count = rate_out // 2
        first = rate_out // 4
        lo, hi = source_span(rate_in, rate_out, first, count)
        out = resample(source[:, lo:hi], lo, rate_in, rate_out, first, count)
        expected = np.sin(2 * np.pi * 440 * np.arange(first, first + count) / rate_out)
        np.testing.assert_allclose(out[0], expected, atol=2e-3)
        np.testing.assert_allclose(out[1], 0.5, atol=1e-6)


def test_a_video_clip_carries_its_audio(tmp_path) -> None:
    """audio=True: each clip's audio starts at its first frame and lasts to the frame after
    its last; the samples are the track's, as AudioClips cuts them; batches stack and are
    the same for any workers."""
    path = media.encode(str(tmp_path / "sound.mp4"), frames=150, audio=True)
    ds = VideoClips(path, 8, frame_step=2, audio=True, sample_rate=16000)
    index = load_or_scan_audio(path)
    whole = audio_window(path, index, 16000, True, 0, index.out_samples(16000))
    samples = round(15 / media.FPS * 16000)  # a clip spans 15 frames
    for i in range(len(ds)):
        item = ds[i]
        first = round((item["pts"][0] - float(index.start)) * 16000)
        assert item["audio"].shape == (samples,)
        end = min(first + samples, len(whole))
        assert np.array_equal(item["audio"][: end - first], whole[first:end]), i
    batches = [[b["audio"] for b in fl.DataLoader(ds, batch_size=3, num_workers=w)] for w in (0, 2)]
    assert batches[0][0].shape == (3, samples)
    assert all(np.array_equal(a, b) for a, b in zip(*batches, strict=True))


def test_clip_samplers_order_audio_windows_and_resume(sounds) -> None:
    paths = [sounds["flac.flac"], sounds["aac.m4a"]]
    ds = AudioClips(paths, 0.5, sample_rate=16000)
    sampler = ClipSampler(ds, clips_per_video=3, seed=5)
    loader = fl.DataLoader(ds, batch_size=2, sampler=sampler)
    full = [(b["file"].tolist(), b["start"].tolist()) for b in loader]
    assert sorted(f for files, _ in full for f in files) == [0, 0, 0, 1, 1, 1]
    first = fl.DataLoader(ds, batch_size=2, sampler=ClipSampler(ds, clips_per_video=3, seed=5))
    it = iter(first)
    got = [(lambda b: (b["file"].tolist(), b["start"].tolist()))(next(it))]
    state = first.state_dict()
    again = fl.DataLoader(ds, batch_size=2, sampler=ClipSampler(ds, clips_per_video=3, seed=5))
    again.load_state_dict(state)
    got += [(b["file"].tolist(), b["start"].tolist()) for b in again]
    assert got == full


def test_the_index_is_cached_and_a_changed_file_refused(sounds, tmp_path) -> None:
    path = str(tmp_path / "a.flac")
    media.encode_sound(path, "flac", seconds=2.0)
    ds = AudioClips(path, 0.5, sample_rate=16000)
    assert os.path.exists(index_path(path, suffix=AUDIO_SUFFIX))  # in the user's cache
    assert os.listdir(tmp_path) == ["a.flac"]  # nothing beside the file
    assert len(ds) == 4
    media.encode_sound(path, "flac", seconds=1.0)
    with pytest.raises(ValueError, match=r"a\.flac: 16000 samples now, 32000 when"):
        ds[0]
    resumed = AudioClips(path, 0.5, sample_rate=16000)
    assert len(resumed) == 2
    problems = resumed.order_changes(ds.order_state(), fl.order.Read(epoch=0, prefix=None))
    assert problems == [f"audio file 0 was {path} (32000 samples), now {path}"]


def test_bad_input_is_named(sounds, tmp_path) -> None:
    silent = media.encode(str(tmp_path / "silent.mp4"), frames=30)
    with pytest.raises(ValueError, match=r"silent\.mp4: has no audio stream"):
        AudioClips(silent, 0.5, sample_rate=16000)
    with pytest.raises(ValueError, match=r"silent\.mp4: has no audio stream"):
        VideoClips(silent, 4, audio=True)
    text = tmp_path / "notes.wav"
    text.write_text("not a sound at all\n" * 50)
    with pytest.raises(ValueError, match=r"notes\.wav: not a video or audio file FFmpeg can read"):
        AudioClips(str(text), 0.5, sample_rate=16000)
    with pytest.raises(ValueError, match=r"mono\.wav: 3\.000 s of audio, too short for one"):
        AudioClips(sounds["mono.wav"], 4, sample_rate=16000)
    with pytest.raises(ValueError, match="sample_rate should be a positive integer"):
        AudioClips(sounds["mono.wav"], 1, sample_rate=0)
    with pytest.raises(ValueError, match="clip_seconds should be a positive number"):
        AudioClips(sounds["mono.wav"], -1, sample_rate=16000)
