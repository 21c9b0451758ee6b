"""Video clips (issue 40): random 16-frame clips (frames 2 apart) of 30-second 960x540 H.264
videos (a keyframe every 2 s), through loaders with 2 workers and per clip in one process.

- Loaders: flowloader's VideoClips + ClipSampler at full size and at 224x224 (FFmpeg scales
  while converting), clips in a random order over all videos and ``grouped=True`` (a video's
  clips one after another, as a video-per-item dataset reads them), also with
  decoder="torchcodec" where torchcodec imports; against, in
  torch's DataLoader: torchcodec's sampler (a dataset of videos, each item
  ``clips_at_random_indices`` of one video: its 8 clips from one decoder, resized by its
  decoder transform), decord (each item: one VideoReader, the 8 clips' frames in one
  ``get_batch``) where it imports, and PyAV used the obvious way (each clip: open, seek to
  its first frame, decode to its last, convert every frame kept), at full size and followed
  by a resize in torch (bilinear).
- Per clip, in one process: the floor (libavcodec decoding from the keyframe to the clip's
  last frame, no conversion), flowloader's clip, and decoding from the start of the file.
- Opening: a video's first clip with no index (scanned), with the index cached, and a clip
  from a dataset already open.

    python -m benchmarks.video [--videos 4] [--runs 3] [--json F]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .common import alternate, children, environment, median, resident_bytes, write_json
from .worker_memory import pss_bytes

WIDTH, HEIGHT, FPS, SECONDS = 960, 540, 30, 30
CLIP_LEN, FRAME_STEP, CLIPS_PER_VIDEO, BATCH, WORKERS = 16, 2, 8, 4, 2


def encode(
    path: str, seed: int, seconds: int = SECONDS, size: tuple[int, int] = (WIDTH, HEIGHT)
) -> None:
    """A 30 s 960x540 H.264 video, a keyframe every 60 frames: moving gradients and noise
    (so that the decoder has real work)."""
    import av

    width, height = size
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    noise = rng.integers(0, 40, (8, height, width, 3), dtype=np.uint8)
    with av.open(path, "w") as out:
        stream = out.add_stream("libx264", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.gop_size = 2 * FPS
        stream.options = {"sc_threshold": "0", "preset": "veryfast", "crf": "23"}
        for n in range(FPS * seconds):
            image = noise[n % 8].copy()
            image[..., 0] += ((x + 4 * n) % 200).astype(np.uint8)
            image[..., 1] += ((y * 2 + 3 * n) % 200).astype(np.uint8)
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            out.mux(stream.encode(frame))
        out.mux(stream.encode())


class ObviousClips:
    """PyAV the obvious way: each clip opens its file, seeks to its first frame (FFmpeg
    goes to the keyframe before), decodes to its last and converts every frame it keeps;
    optionally resized in torch after."""

    def __init__(self, paths: list[str], starts: list[tuple[int, int]], resize: bool) -> None:
        self.paths, self.starts, self.resize = paths, starts, resize

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> Any:
        import av
        import torch

        video, start = self.starts[i]
        wanted = set(range(start, start + (CLIP_LEN - 1) * FRAME_STEP + 1, FRAME_STEP))
        frames = []
        with av.open(self.paths[video]) as container:
            stream = container.streams.video[0]
            stream.codec_context.thread_count = 1
            frame_ticks = 1 / (FPS * stream.time_base)
            container.seek(int(start * frame_ticks), stream=stream)
            for frame in container.decode(stream):
                number = round(frame.pts / frame_ticks)
                if number in wanted:
                    frames.append(frame.to_ndarray(format="rgb24"))
                if number >= max(wanted):
                    break
        clip = torch.from_numpy(np.stack(frames))
        if self.resize:
            chw = clip.permute(0, 3, 1, 2).float()
            clip = torch.nn.functional.interpolate(chw, size=(224, 224), mode="bilinear")
            clip = clip.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1)
        return clip


class TorchCodecVideos:
    """torchcodec's recipe: item v opens video v's decoder (exact seek mode, one FFmpeg
    thread) and takes ``CLIPS_PER_VIDEO`` clips with ``clips_at_random_indices``."""

    def __init__(self, paths: list[str], resize: bool) -> None:
        self.paths, self.resize = paths, resize

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, v: int) -> Any:
        from torchcodec.decoders import VideoDecoder
        from torchcodec.samplers import clips_at_random_indices
        from torchcodec.transforms import Resize

        decoder = VideoDecoder(
            self.paths[v],
            dimension_order="NHWC",
            num_ffmpeg_threads=1,
            transforms=[Resize(size=(224, 224))] if self.resize else None,
        )
        clips = clips_at_random_indices(
            decoder,
            num_clips=CLIPS_PER_VIDEO,
            num_frames_per_clip=CLIP_LEN,
            num_indices_between_frames=FRAME_STEP,
        )
        return clips.data


class DecordVideos:
    """decord's recipe: item v opens a VideoReader (one thread; at 224x224 when resizing)
    and reads the frames of ``CLIPS_PER_VIDEO`` random clips in one ``get_batch``."""

    def __init__(self, paths: list[str], resize: bool, seed: int) -> None:
        self.paths, self.resize, self.seed = paths, resize, seed

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, v: int) -> Any:
        import decord

        size = {"width": 224, "height": 224} if self.resize else {}
        reader = decord.VideoReader(self.paths[v], ctx=decord.cpu(0), num_threads=1, **size)
        span = (CLIP_LEN - 1) * FRAME_STEP + 1
        rng = np.random.default_rng((self.seed, v))
        starts = rng.choice(len(reader) - span + 1, CLIPS_PER_VIDEO, replace=False)
        wanted = sorted({int(s) + k * FRAME_STEP for s in starts for k in range(CLIP_LEN)})
        frames = dict(zip(wanted, reader.get_batch(wanted).asnumpy(), strict=True))
        return np.stack(
            [np.stack([frames[int(s) + k * FRAME_STEP] for k in range(CLIP_LEN)]) for s in starts]
        )


def importable(module: str) -> bool:
    try:
        __import__(module)
    except (ImportError, OSError, RuntimeError):
        return False
    return True


def floor_clip(path: str, index: Any, start: int) -> None:
    """libavcodec alone: seek to the keyframe, decode to the clip's last frame, no
    conversion."""
    import av

    last = int(index.pts[start + (CLIP_LEN - 1) * FRAME_STEP])
    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = 1
        container.seek(int(index.pts[index.keyframe_before(start)]), stream=stream)
        for frame in container.decode(stream):
            if frame.pts >= last:
                break


def from_start_clip(path: str, start: int) -> None:
    """Decoding from the start of the file to the clip's last frame, converting its frames."""
    import av

    last = start + (CLIP_LEN - 1) * FRAME_STEP
    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = 1
        for number, frame in enumerate(container.decode(stream)):
            if number >= start and (number - start) % FRAME_STEP == 0:
                frame.to_ndarray(format="rgb24")
            if number >= last:
                break


def loader_measures(paths: list[str], epoch_counter: Any) -> dict[str, Callable[[], float]]:
    import torch.utils.data

    import flowloader as fl
    from flowloader.video import ClipSampler, VideoClips

    def flowloader_rate(
        size: tuple[int, int] | None, decoder: str = "pyav", grouped: bool = False
    ) -> float:
        ds = VideoClips(paths, CLIP_LEN, frame_step=FRAME_STEP, size=size, decoder=decoder)
        seed = next(epoch_counter)
        sampler = ClipSampler(ds, clips_per_video=CLIPS_PER_VIDEO, seed=seed, grouped=grouped)
        loader = fl.DataLoader(ds, batch_size=BATCH, sampler=sampler, num_workers=WORKERS)
        start = time.perf_counter()
        clips = sum(len(batch["frames"]) for batch in loader)
        return clips / (time.perf_counter() - start)

    def obvious_rate(resize: bool) -> float:
        ds = VideoClips(paths, CLIP_LEN, frame_step=FRAME_STEP)
        sampler = ClipSampler(ds, clips_per_video=CLIPS_PER_VIDEO, seed=next(epoch_counter))
        starts = [ds.locate(i) for i in sampler]
        loader = torch.utils.data.DataLoader(
            ObviousClips(paths, starts, resize), batch_size=BATCH, num_workers=WORKERS
        )
        start = time.perf_counter()
        clips = sum(len(batch) for batch in loader)
        return clips / (time.perf_counter() - start)

    def per_video_rate(dataset: Any) -> float:
        loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=WORKERS)
        start = time.perf_counter()
        clips = sum(len(clips) for clips in loader)
        return clips / (time.perf_counter() - start)

    measures = {
        "flowloader VideoClips, full size": lambda: flowloader_rate(None),
        "flowloader VideoClips, size=(224, 224)": lambda: flowloader_rate((224, 224)),
        "flowloader VideoClips, full size, ClipSampler(grouped=True)": lambda: flowloader_rate(
            None, grouped=True
        ),
        "flowloader VideoClips, 224, ClipSampler(grouped=True)": lambda: flowloader_rate(
            (224, 224), grouped=True
        ),
    }
    if importable("torchcodec.decoders"):
        measures |= {
            "flowloader VideoClips, decoder=torchcodec, full size": lambda: flowloader_rate(
                None, "torchcodec"
            ),
            "flowloader VideoClips, decoder=torchcodec, 224": lambda: flowloader_rate(
                (224, 224), "torchcodec"
            ),
            "torchcodec clips_at_random_indices + torch DataLoader, full size": lambda: (
                per_video_rate(TorchCodecVideos(paths, False))
            ),
            "torchcodec clips_at_random_indices + torch DataLoader, Resize 224": lambda: (
                per_video_rate(TorchCodecVideos(paths, True))
            ),
        }
    if importable("decord"):
        measures |= {
            "decord get_batch + torch DataLoader, full size": lambda: per_video_rate(
                DecordVideos(paths, False, next(epoch_counter))
            ),
            "decord get_batch + torch DataLoader, 224": lambda: per_video_rate(
                DecordVideos(paths, True, next(epoch_counter))
            ),
        }
    return measures | {
        "PyAV per clip + torch DataLoader, full size": lambda: obvious_rate(False),
        "PyAV per clip + torch DataLoader, + torch resize to 224": lambda: obvious_rate(True),
    }


def per_clip_measures(paths: list[str]) -> dict[str, Callable[[], float]]:
    """Milliseconds per clip in one process, over the same 12 random clips."""
    from flowloader.video import VideoClips, load_or_scan

    ds = VideoClips(paths, CLIP_LEN, frame_step=FRAME_STEP)
    picks = np.random.default_rng(0).choice(len(ds), 12, replace=False).tolist()
    located = [ds.locate(i) for i in picks]
    indexes = [load_or_scan(p) for p in paths]

    def timed(one: Callable[[int, int, int], Any]) -> float:
        start = time.perf_counter()
        for i, (video, first) in zip(picks, located, strict=True):
            one(i, video, first)
        return (time.perf_counter() - start) / len(picks) * 1000

    return {
        "floor: libavcodec from the keyframe, no conversion": lambda: timed(
            lambda i, v, s: floor_clip(paths[v], indexes[v], s)
        ),
        "flowloader VideoClips[i], full size": lambda: timed(lambda i, v, s: ds[i]),
        "decoding from the start of the file": lambda: timed(
            lambda i, v, s: from_start_clip(paths[v], s)
        ),
    }


def open_measures(paths: list[str], folder: str) -> dict[str, Callable[[], float]]:
    """Milliseconds to a video's first clip: no index yet, the index cached, an open one."""
    import shutil

    from flowloader.video import VideoClips

    counter = iter(range(10**6))
    open_ds = VideoClips(paths[0], CLIP_LEN, frame_step=FRAME_STEP)

    def cold() -> float:
        copy = os.path.join(folder, f"cold-{next(counter)}.mp4")
        shutil.copy(paths[0], copy)
        start = time.perf_counter()
        VideoClips(copy, CLIP_LEN, frame_step=FRAME_STEP)[5]
        seconds = time.perf_counter() - start
        os.unlink(copy)
        return seconds * 1000

    def cached() -> float:
        start = time.perf_counter()
        VideoClips(paths[0], CLIP_LEN, frame_step=FRAME_STEP)[5]
        return (time.perf_counter() - start) * 1000

    def already_open() -> float:
        start = time.perf_counter()
        open_ds[5]
        return (time.perf_counter() - start) * 1000

    def torchcodec_first_clip(seek_mode: str) -> float:
        from torchcodec.decoders import VideoDecoder

        start = time.perf_counter()
        decoder = VideoDecoder(paths[0], num_ffmpeg_threads=1, seek_mode=seek_mode)
        decoder.get_frames_at(list(range(5 * 31, 5 * 31 + 31, FRAME_STEP)))
        return (time.perf_counter() - start) * 1000

    measures = {
        "flowloader: open with no index (scan) + first clip": cold,
        "flowloader: open with the index cached + first clip": cached,
        "flowloader: a clip from a dataset already open": already_open,
    }
    if importable("torchcodec.decoders"):
        measures |= {
            f"torchcodec: VideoDecoder(seek_mode={mode!r}) + first clip": (
                lambda mode=mode: torchcodec_first_clip(mode)
            )
            for mode in ("exact", "approximate")
        }
    return measures


def worker_memory(paths: list[str], epochs: int) -> list[list[tuple[int, int]]]:
    """Each worker's (resident, proportional) bytes after each epoch of a persistent loader
    of random full-size clips (batches of 4 x 16 frames of 960x540)."""
    import flowloader as fl
    from flowloader.video import ClipSampler, VideoClips

    ds = VideoClips(paths, CLIP_LEN, frame_step=FRAME_STEP)
    sampler = ClipSampler(ds, clips_per_video=CLIPS_PER_VIDEO, seed=0)
    loader = fl.DataLoader(
        ds, batch_size=BATCH, sampler=sampler, num_workers=WORKERS, persistent_workers=True
    )
    per_epoch = []
    for _ in range(epochs):
        assert sum(len(batch["frames"]) for batch in loader) == len(sampler)
        workers = children(os.getpid())
        per_epoch.append(sorted((resident_bytes(p), pss_bytes(p)) for p in workers))
    return per_epoch


def worker_memory_in_fresh_process(paths: list[str], epochs: int) -> list[list[tuple[int, int]]]:
    """``worker_memory`` run from a new interpreter: the workers fork from a parent that has
    imported flowloader and PyAV only, not torch and the peers this benchmark loads."""
    import json
    import subprocess
    import sys

    code = (
        "import json, sys; from benchmarks.video import worker_memory; "
        "print(json.dumps(worker_memory(json.loads(sys.argv[1]), int(sys.argv[2]))))"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(paths), str(epochs)],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    return [[(rss, pss) for rss, pss in epoch] for epoch in json.loads(done.stdout)]


def open_many(folder: str, count: int) -> float:
    """Seconds to open a VideoClips over ``count`` videos whose indexes are cached: copies
    of one short video, each with its cached index (a stat and a small read each)."""
    import shutil

    from flowloader.video import VideoClips
    from flowloader.video.index import index_path

    many = os.path.join(folder, "many")
    os.makedirs(many)
    first = os.path.join(many, "v0.mp4")
    encode(first, 0, seconds=2, size=(64, 48))
    VideoClips(first, CLIP_LEN)  # indexes it
    paths = [first]
    for k in range(1, count):
        path = os.path.join(many, f"v{k}.mp4")
        shutil.copy2(first, path)  # the same size and mtime: the index still matches
        shutil.copy2(index_path(first), index_path(path))
        paths.append(path)
    start = time.perf_counter()
    ds = VideoClips(paths, CLIP_LEN)
    seconds = time.perf_counter() - start
    assert len(ds) == count * ds.clips_per_video[0]
    return seconds


def run(videos: int, runs: int, many: int, memory_epochs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        paths = [os.path.join(folder, f"video{k}.mp4") for k in range(videos)]
        for seed, path in enumerate(paths):
            encode(path, seed)
        counter = iter(range(10**6))
        return {
            "videos": videos,
            "loaders": alternate(runs, loader_measures(paths, counter)),
            "per_clip_ms": alternate(runs, per_clip_measures(paths)),
            "open_ms": alternate(runs, open_measures(paths, folder)),
            "open_many": {"videos": many, "seconds": open_many(folder, many)},
            "worker_rss": worker_memory_in_fresh_process(paths, memory_epochs),
        }


def table(record: dict[str, Any]) -> str:
    lines = [
        f"{record['videos']} videos of {SECONDS} s, {WIDTH}x{HEIGHT} H.264 (a keyframe every "
        f"2 s); clips of {CLIP_LEN} frames {FRAME_STEP} apart, {CLIPS_PER_VIDEO} random clips "
        f"per video, batches of {BATCH}, {WORKERS} workers; clips/s, medians of interleaved "
        "epochs.",
        "",
        "| loader | clips/s | runs |",
        "| --- | ---: | --- |",
    ]
    for name, rates in record["loaders"].items():
        shown = ", ".join(f"{r:.1f}" for r in rates)
        lines.append(f"| {name} | {median(rates):.1f} | {shown} |")
    for key, title in (("per_clip_ms", "per clip, one process"), ("open_ms", "first clip")):
        lines += ["", f"| {title} | ms | runs |", "| --- | ---: | --- |"]
        for name, values in record[key].items():
            shown = ", ".join(f"{v:.1f}" for v in values)
            lines.append(f"| {name} | {median(values):.1f} | {shown} |")
    many = record["open_many"]
    lines += ["", f"Opening {many['videos']:,} videos with cached indexes: {many['seconds']:.3f} s"]
    epochs = record["worker_rss"]
    lines += [
        "",
        f"Worker memory over {len(epochs)} epochs of random full-size clips, {WORKERS} "
        "persistent worker processes forked from a parent that imported flowloader and PyAV "
        "only; MB of each worker after the epoch, resident (pages shared with the parent "
        "included) and PSS (shared pages split among their users):",
        "",
        "| epoch | worker RSS (MB) | worker PSS (MB) |",
        "| ---: | --- | --- |",
    ]
    for k, epoch in enumerate(epochs, start=1):
        if k in (1, 2, 5, 10, 15, len(epochs)):
            rss = ", ".join(f"{r / 1e6:.0f}" for r, _ in epoch)
            pss = ", ".join(f"{p / 1e6:.0f}" for _, p in epoch)
            lines.append(f"| {k} | {rss} | {pss} |")
    mb = [[p / 1e6 for _, p in epoch] for epoch in epochs]
    growth = max(mb[-1]) - max(mb[1]) if len(mb) > 1 else 0.0
    lines += ["", f"PSS growth from epoch 2 to epoch {len(mb)}: {growth:+.1f} MB."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--many", type=int, default=10_000, help="cached videos to open")
    parser.add_argument("--memory-epochs", type=int, default=20)
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    record = run(args.videos, args.runs, args.many, args.memory_epochs)
    print(table(record))
    write_json(args.json, [record])


if __name__ == "__main__":
    main()
