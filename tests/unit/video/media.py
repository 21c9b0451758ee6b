"""Small real videos for flowloader.video's tests, encoded by PyAV in a fraction of a second:
H.264 with a 2 s GOP and B-frames (MP4 and MKV), a variable frame rate, VP9 in WebM, AV1,
an audio track, an audio-only file. Each frame is drawn from its number, so a wrong frame
shows."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

try:
    import av
except ImportError:  # the core's environment: the video tests skip themselves
    av = None

WIDTH, HEIGHT, FPS = 64, 48, 30


def picture(number: int) -> np.ndarray:
    """Frame ``number``: a gradient that moves with it and a bar at its row."""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    image = np.empty((HEIGHT, WIDTH, 3), np.uint8)
    image[..., 0] = (x * 4 + number * 5) % 256
    image[..., 1] = (y * 5 + number * 3) % 256
    image[..., 2] = 128
    image[(number * 3) % HEIGHT, :, :] = 255
    return image


def encode(
    path: str,
    frames: int = 150,
    *,
    codec: str = "libx264",
    variable_rate: bool = False,
    audio: bool = False,
) -> str:
    """Write ``frames`` frames to ``path`` (the container from its suffix); a keyframe every
    60 frames (2 s at 30 frames/s)."""
    with av.open(path, "w") as out:
        stream = out.add_stream(codec, rate=FPS)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.codec_context.gop_size = 60
        if codec == "libx264":
            stream.options = {"bf": "2", "sc_threshold": "0", "preset": "veryfast"}
        if variable_rate:
            stream.codec_context.time_base = Fraction(1, 1000)
        sound = out.add_stream("aac", rate=16000) if audio else None
        steps = np.random.default_rng(0).choice([20, 33, 50], frames)
        at = 0
        for number in range(frames):
            frame = av.VideoFrame.from_ndarray(picture(number), format="rgb24")
            if variable_rate:
                frame.pts, frame.time_base = at, Fraction(1, 1000)
                at += int(steps[number])
            out.mux(stream.encode(frame))
        out.mux(stream.encode())
        if sound is not None:
            _add_sound(out, sound, seconds=frames / FPS)
    return path


def encode_audio_only(path: str, seconds: float = 1.0) -> str:
    with av.open(path, "w") as out:
        _add_sound(out, out.add_stream("aac", rate=16000), seconds)
    return path


def _add_sound(out: object, sound: object, seconds: float) -> None:
    rate, chunk = 16000, 1024
    t = np.arange(int(rate * seconds)) / rate
    wave = (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    for first in range(0, len(wave), chunk):
        part = wave[first : first + chunk][None, :]
        frame = av.AudioFrame.from_ndarray(part, format="flt", layout="mono")
        frame.sample_rate, frame.pts = rate, first
        out.mux(sound.encode(frame))
    out.mux(sound.encode())


def encode_sound(
    path: str, codec: str, *, rate: int = 44100, seconds: float = 3.0, layout: str = "stereo"
) -> str:
    """A sound file (the container from the suffix): a 440 Hz tone on the left, 1 kHz on the
    right, in frames of the codec's size."""
    with av.open(path, "w") as out:
        stream = out.add_stream(codec, rate=rate)
        stream.layout = layout
        size = stream.codec_context.frame_size or 1024
        planar = stream.codec_context.format.is_planar
        t = np.arange(int(rate * seconds)) / rate
        tones = [0.3 * np.sin(2 * np.pi * 440 * t), 0.2 * np.sin(2 * np.pi * 1000 * t + 1)]
        wave = np.stack(tones[: 2 if layout == "stereo" else 1]).astype(np.float32)
        for first in range(0, wave.shape[1], size):
            part = wave[:, first : first + size]
            data = part if planar else part.T.reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(
                np.ascontiguousarray(data), format="fltp" if planar else "flt", layout=layout
            )
            frame.sample_rate, frame.pts = rate, first
            out.mux(stream.encode(frame))
        out.mux(stream.encode())
    return path


def decode_sound(path: str) -> np.ndarray:
    """Every sample of ``path``'s audio, decoded in sequence: float32 ``channels x samples``."""
    parts = []
    with av.open(path) as container:
        for frame in container.decode(container.streams.audio[0]):
            data = frame.to_ndarray()
            if not frame.format.is_planar:
                data = data.reshape(-1, len(frame.layout.channels)).T
            if data.dtype == np.int16:
                data = data / 2.0**15
            parts.append(data.astype(np.float32))
    return np.concatenate(parts, axis=1)


def decode_all(path: str, size: tuple[int, int] | None = None) -> np.ndarray:
    """Every frame of ``path``, decoded in sequence, converted as VideoClips converts."""
    frames = []
    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = 1
        height, width = size if size is not None else (stream.height, stream.width)
        for frame in container.decode(stream):
            frames.append(
                frame.to_ndarray(
                    format="rgb24", width=width, height=height, interpolation="BILINEAR"
                )
            )
    return np.stack(frames)
