"""ClipSampler and UniformClipSampler: k clips of every video, random access by position,
new draws each epoch, dealt over ranks, exact state."""

from __future__ import annotations

import numpy as np
import pytest

import flowloader as fl
from flowloader.video import ClipSampler, UniformClipSampler


class Clips:
    def __init__(self, counts: list[int]) -> None:
        self.clips_per_video = np.array(counts, dtype=np.int64)
        self.clip_starts = np.concatenate([[0], np.cumsum(self.clips_per_video)])

    def __len__(self) -> int:
        return int(self.clip_starts[-1])

    def video_of(self, clip: int) -> int:
        return int(np.searchsorted(self.clip_starts, clip, side="right")) - 1


def test_k_distinct_clips_of_every_video_each_epoch() -> None:
    ds = Clips([10, 3, 1, 7])
    sampler = ClipSampler(ds, clips_per_video=3, seed=5)
    epochs = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        clips = list(sampler)
        assert len(clips) == len(sampler) == 12
        by_video: dict[int, list[int]] = {}
        for clip in clips:
            by_video.setdefault(ds.video_of(clip), []).append(clip)
        assert {v: len(c) for v, c in by_video.items()} == {0: 3, 1: 3, 2: 3, 3: 3}
        assert len(set(by_video[0])) == len(set(by_video[3])) == 3  # distinct where it can
        assert sorted(by_video[1]) == [10, 11, 12]  # a video of 3 clips gives each once
        assert by_video[2] == [13, 13, 13]  # one clip: three times
        epochs.append(clips)
    assert epochs[0] != epochs[1] != epochs[2]
    assert sorted(epochs[0][:4]) != sorted(epochs[0])[:4]  # the videos are interleaved


def test_positions_are_random_access_and_draws_cover_a_video_over_epochs() -> None:
    ds = Clips([50] * 4)
    sampler = ClipSampler(ds, clips_per_video=2, seed=1)
    sampler.set_epoch(4)
    whole = list(sampler)
    at = sampler.clips_at(np.array([7, 0, 3]))
    assert at.tolist() == [whole[7], whole[0], whole[3]]
    seen = set()
    for epoch in range(200):
        sampler.set_epoch(epoch)
        seen.update(c for c in sampler if c < 50)
    assert len(seen) > 45  # the draws move over the whole video


def test_grouped_clips_come_a_video_at_a_time() -> None:
    """grouped=True: the same draws per video as ungrouped, the videos in a random order,
    each video's clips one after another; a state refuses a sampler grouped otherwise."""
    ds = Clips([10, 3, 8, 7, 9])
    grouped = ClipSampler(ds, clips_per_video=3, seed=5, grouped=True)
    loose = ClipSampler(ds, clips_per_video=3, seed=5)
    for epoch in range(3):
        grouped.set_epoch(epoch)
        loose.set_epoch(epoch)
        clips = list(grouped)
        videos = [ds.video_of(c) for c in clips]
        runs = [videos[i : i + 3] for i in range(0, 15, 3)]
        assert all(len(set(run)) == 1 for run in runs)
        assert sorted(run[0] for run in runs) == [0, 1, 2, 3, 4]
        assert sorted(clips) == sorted(loose)
    assert [run[0] for run in runs] != [0, 1, 2, 3, 4]
    # a resume compares the settings (the loader refuses the difference once clips were read)
    assert fl.order.settings_changes(
        "sampler", grouped.order_settings(), loose.order_settings()
    ) == ["sampler grouped: saved True, this loader False"]


def test_unshuffled_goes_video_by_video() -> None:
    ds = Clips([6, 6])
    clips = list(ClipSampler(ds, clips_per_video=2, shuffle=False, seed=0))
    assert [c // 6 for c in clips] == [0, 0, 1, 1]


def test_ranks_split_an_epoch_and_state_resumes_on_another_world() -> None:
    ds = Clips([9, 4, 7, 5, 8])
    whole = list(ClipSampler(ds, clips_per_video=2, seed=3, num_replicas=1, rank=0))
    ranks = [list(ClipSampler(ds, 2, seed=3, num_replicas=2, rank=r)) for r in range(2)]
    merged = [c for pair in zip(*ranks, strict=True) for c in pair]
    assert merged == whole
    saved = ClipSampler(ds, 2, seed=3, num_replicas=1, rank=0).order_settings()
    other = ClipSampler(ds, 3, seed=3, num_replicas=1, rank=0).order_settings()
    assert fl.order.settings_changes("sampler", saved, other) == [
        "sampler clips_per_video: saved 2, this loader 3"
    ]


def test_uniform_clips_are_evenly_spaced() -> None:
    ds = Clips([9, 1, 4])
    assert list(UniformClipSampler(ds, clips_per_video=3, num_replicas=1, rank=0)) == [
        0,
        4,
        8,
        9,
        9,
        9,
        10,
        12,
        13,
    ]
    assert list(UniformClipSampler(ds, num_replicas=1, rank=0)) == [4, 9, 11]


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="clips_per_video should be a positive integer"):
        ClipSampler(Clips([3]), clips_per_video=0)
    with pytest.raises(TypeError, match="needs a dataset of clips per video"):
        ClipSampler(list(range(5)), clips_per_video=1)
