"""Clip samplers: k clips of every video per epoch, as index arithmetic.

Position p of an epoch is computed, not looked up: under ClipSampler, the epoch's keyed
permutation of ``range(videos * k)`` takes p to (video v, draw j); draw j of video v is place
j of that video's keyed permutation of its clips for this epoch (a video with fewer than k
clips starts another permutation after each of its passes). So every video gives k distinct
clips where it has them, each epoch others, and any position is found without building the
epoch's list. UniformClipSampler takes k evenly spaced clips of each video, in order.
Dealing to ranks, padding, ``drop_last``, ``state_dict()`` and resume onto other worker
counts and world sizes are DistributedSampler's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

import flowloader as fl
from flowloader.distributed import dealt_positions, world_or_single
from flowloader.permutation import name_hash, pass_keys, permute

_ORDER = name_hash("flowloader.video.ClipSampler.order")
_DRAWS = name_hash("flowloader.video.ClipSampler.draws")


class _PerVideoSampler(fl.DistributedSampler):
    """``clips_per_video`` clips of each video of a VideoClips-like dataset (one with
    ``clips_per_video`` and ``clip_starts`` arrays), position by position."""

    ORDER = "clips"  # how order_settings names the order

    def __init__(
        self,
        dataset: Any,
        clips_per_video: int,
        *,
        seed: int,
        shuffle: bool,
        num_replicas: int | None,
        rank: int | None,
        drop_last: bool,
    ) -> None:
        if isinstance(clips_per_video, bool) or int(clips_per_video) < 1:
            raise ValueError(f"clips_per_video should be a positive integer, got {clips_per_video}")
        for needed in ("clips_per_video", "clip_starts"):
            if not hasattr(dataset, needed):
                raise TypeError(
                    f"{type(self).__name__} needs a dataset of clips per video (VideoClips); "
                    f"a {type(dataset).__name__} has no {needed}"
                )
        self.k = int(clips_per_video)
        if num_replicas is None and rank is None:
            num_replicas, rank = world_or_single()
        super().__init__(dataset, num_replicas, rank, shuffle, seed, drop_last)

    @property
    def _size(self) -> int:
        return len(self.dataset.clips_per_video) * self.k

    def clips_at(self, positions: np.ndarray) -> np.ndarray:
        """The clip (dataset index) at each of ``positions`` of this epoch's order."""
        raise NotImplementedError

    def _epoch_order(self) -> np.ndarray:
        return self.clips_at(np.arange(self._size, dtype=np.int64))

    def __iter__(self) -> Iterator[int]:
        """This rank's clips, computed a chunk at a time."""
        for positions in dealt_positions(self):
            yield from self.clips_at(positions).tolist()

    def read_state(self, state: dict[str, Any], taken: int) -> dict[str, Any]:
        """The clips read are scattered over the videos: no prefix once any was read."""
        start = int(state.get("start", 0)) if state else 0
        return {"prefix": 0 if start == 0 and taken == 0 else None}

    def order_settings(self) -> dict[str, Any]:
        """flowloader.order's contract: DistributedSampler's and the clips per video."""
        return {**super().order_settings(), "order": self.ORDER, "clips_per_video": self.k}


class ClipSampler(_PerVideoSampler):
    """``clips_per_video`` random clips of every video per epoch (distinct where the video
    has as many), in a random order over all videos (``shuffle=False``: video by video); a
    new draw each epoch (``set_epoch``, or the loader's epoch). ``grouped=True``: the videos
    in a random order, each video's clips one after another, so a batch holds clips of few
    videos, decoded together from one container (faster: their decoding is shared; the
    recipe of a dataset whose item is a video's clips, as torchcodec's samplers are used).
    With ``num_replicas``/``rank`` (found from torch.distributed or torchrun by default)
    each rank takes every ``num_replicas``-th position."""

    ORDER = "random clips"

    def __init__(
        self,
        dataset: Any,
        clips_per_video: int = 1,
        *,
        seed: int = 0,
        shuffle: bool = True,
        grouped: bool = False,
        num_replicas: int | None = None,
        rank: int | None = None,
        drop_last: bool = False,
    ) -> None:
        super().__init__(
            dataset,
            clips_per_video,
            seed=seed,
            shuffle=shuffle,
            num_replicas=num_replicas,
            rank=rank,
            drop_last=drop_last,
        )
        self.grouped = bool(grouped)

    def order_settings(self) -> dict[str, Any]:
        """flowloader.order's contract: the per-video settings and ``grouped``."""
        return {**super().order_settings(), "grouped": self.grouped}

    def clips_at(self, positions: np.ndarray) -> np.ndarray:
        positions = np.asarray(positions, dtype=np.int64)
        key = pass_keys(self.seed, np.array([_ORDER], np.uint64), np.array([self.epoch]))
        if self.shuffle and self.grouped:
            videos = len(self.dataset.clips_per_video)
            order = permute(positions // self.k, np.array(videos), key)
            positions = order * self.k + positions % self.k
        elif self.shuffle:
            positions = permute(positions, np.array(self._size), key)
        video, draw = positions // self.k, positions % self.k
        counts = np.asarray(self.dataset.clips_per_video, dtype=np.int64)[video]
        rounds = draw // counts
        streams = np.uint64(_DRAWS) ^ video.astype(np.uint64)
        keys = pass_keys(self.seed, streams, self.epoch * self.k + rounds)
        return np.asarray(self.dataset.clip_starts)[video] + permute(draw % counts, counts, keys)


class UniformClipSampler(_PerVideoSampler):
    """``clips_per_video`` evenly spaced clips of every video (the first and the last among
    them where k > 1; the middle one where k = 1), video by video: the usual evaluation
    order, the same every epoch."""

    ORDER = "uniform clips"

    def __init__(
        self,
        dataset: Any,
        clips_per_video: int = 1,
        *,
        num_replicas: int | None = None,
        rank: int | None = None,
        drop_last: bool = False,
    ) -> None:
        super().__init__(
            dataset,
            clips_per_video,
            seed=0,
            shuffle=False,
            num_replicas=num_replicas,
            rank=rank,
            drop_last=drop_last,
        )

    def clips_at(self, positions: np.ndarray) -> np.ndarray:
        positions = np.asarray(positions, dtype=np.int64)
        video, draw = positions // self.k, positions % self.k
        last = np.asarray(self.dataset.clips_per_video, dtype=np.int64)[video] - 1
        if self.k == 1:
            picked = last // 2
        else:
            picked = (draw * last * 2 + (self.k - 1)) // (2 * (self.k - 1))  # rounded
        return np.asarray(self.dataset.clip_starts)[video] + picked
