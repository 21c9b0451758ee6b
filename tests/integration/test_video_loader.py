"""Video clips through the loader: the same batches for any worker count and method, exact
resume at random points, a changed video's clips dropped alone under skip_errors, with its
path recorded."""

from __future__ import annotations

import json
import random
import shutil

import numpy as np
import pytest

import flowloader as fl

pytest.importorskip("av", reason="needs PyAV (pip install 'flowloader[video]')")
from flowloader.video import ClipSampler, UniformClipSampler, VideoClips

from ..unit.video import media


@pytest.fixture(scope="module", autouse=True)
def index_cache(tmp_path_factory):
    """The module's own index cache (``$FLOWLOADER_CACHE``, inherited by the workers), not
    the user's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FLOWLOADER_CACHE", str(tmp_path_factory.mktemp("index-cache")))
        yield


@pytest.fixture(scope="module")
def two_videos(tmp_path_factory) -> list[str]:
    folder = tmp_path_factory.mktemp("clips")
    return [
        media.encode(str(folder / "a.mp4"), frames=120),
        media.encode(str(folder / "b.mkv"), frames=90, variable_rate=True),
    ]


def described(batch: dict) -> tuple:
    """A batch as (videos, first timestamps, a digest of its frames)."""
    frames = batch["frames"]
    return batch["video"].tolist(), batch["pts"][:, 0].round(6).tolist(), float(frames.mean())


def clips(loader) -> list[tuple]:
    return [described(batch) for batch in loader]


def test_the_same_batches_for_any_workers_and_method(two_videos) -> None:
    ds = VideoClips(two_videos, 4, frame_step=2, clip_stride=6, size=(24, 32))

    def run(**options) -> list:
        loader = fl.DataLoader(
            ds, batch_size=5, sampler=ClipSampler(ds, clips_per_video=6, seed=2), **options
        )
        return clips(loader) + clips(loader)

    expected = run()
    assert len(expected) == 6  # 12 clips an epoch, two epochs
    batch = next(iter(fl.DataLoader(ds, batch_size=5)))
    assert batch["frames"].shape == (5, 4, 24, 32, 3)
    assert batch["frames"].dtype == np.uint8
    assert run(num_workers=2) == expected
    assert run(num_workers=1, worker_method="thread") == expected
    assert run(num_workers=3, worker_method="thread", persistent_workers=True) == expected


def test_uniform_clips_for_evaluation(two_videos) -> None:
    ds = VideoClips(two_videos, 8)
    loader = fl.DataLoader(ds, batch_size=3, sampler=UniformClipSampler(ds, clips_per_video=3))
    starts = [ds.locate(i) for i in UniformClipSampler(ds, clips_per_video=3)]
    assert starts == [(0, 0), (0, 56), (0, 112), (1, 0), (1, 40), (1, 80)]
    assert [b["video"].tolist() for b in loader] == [[0, 0, 0], [1, 1, 1]]


def resume_points(two_videos, count: int) -> None:
    """``count`` random cuts over two epochs: a random loader before (0-3 workers, threads;
    one cut in ten onto processes) and after; the batches are those of one run."""
    ds = VideoClips(two_videos, 2, clip_stride=3, size=(8, 8))

    def loader(workers: int, method: str) -> fl.DataLoader:
        sampler = ClipSampler(ds, clips_per_video=8, seed=11)
        options = {"num_workers": workers, "worker_method": method}
        return fl.DataLoader(ds, batch_size=3, sampler=sampler, **options)

    reference = loader(0, "thread")
    full = clips(reference) + clips(reference)
    draw = random.Random(20261204)
    for point in range(count):
        method = "multiprocessing" if point % 10 == 0 else "thread"
        cut = draw.randrange(1, len(full))
        first = loader(draw.randrange(4), method)
        got: list = []
        while len(got) < cut:
            for batch in first:
                got.append(described(batch))
                if len(got) == cut:
                    break
        state = json.loads(json.dumps(first.state_dict()))
        second = loader(draw.randrange(4), "thread")
        second.load_state_dict(state)
        while len(got) < len(full):
            got += clips(second)
        assert got == full, f"cut at batch {cut} of {len(full)}"


def test_random_resume_points_are_exact(two_videos) -> None:
    resume_points(two_videos, 12)


@pytest.mark.slow
def test_a_hundred_random_resume_points_are_exact(two_videos) -> None:
    resume_points(two_videos, 100)


def test_skip_errors_drops_the_clips_of_a_changed_video_alone(two_videos, tmp_path) -> None:
    paths = [str(tmp_path / "a.mp4"), str(tmp_path / "b.mkv")]
    for source, target in zip(two_videos, paths, strict=True):
        shutil.copy(source, target)
    ds = VideoClips(str(tmp_path), 10)  # the folder's videos, sorted: 12 clips of a, 9 of b
    assert ds.paths == paths
    media.encode(paths[1], frames=50)  # b rewritten after the dataset was made
    loader = fl.DataLoader(ds, batch_size=4, num_workers=2, skip_errors=ValueError)
    iterator = iter(loader)
    with pytest.warns(fl.errors.SkippedSampleWarning, match=r"b\.mkv: 50 frames now"):
        videos = [v for batch in iterator for v in batch["video"].tolist()]
    assert videos == [0] * 12
    assert sorted(skip.index for skip in iterator.stats().skipped) == list(range(12, 21))
    assert {skip.path for skip in iterator.stats().skipped} == {paths[1]}


@pytest.mark.parametrize("method", ["thread", "multiprocessing"])
def test_a_loop_left_early_leaves_nothing_open(two_videos, method) -> None:
    """Leaving the loop after one batch: the workers stop, no video stays open in this
    process, and no shared-memory segment is left."""
    import os

    from flowloader._ipc import shm

    from .test_error_cleanup import left_after

    ds = VideoClips(two_videos, 4, size=(16, 16))
    before = set(os.listdir("/proc/self/fd"))
    loader = fl.DataLoader(ds, batch_size=2, num_workers=2, worker_method=method)
    for batch in loader:
        assert batch["frames"].shape == (2, 4, 16, 16, 3)
        break
    del batch, loader
    assert left_after(5.0) == ([], [], [])
    assert set(os.listdir("/proc/self/fd")) <= before
    assert not shm.list_segments(shm.process_prefix())
