"""ShardSampler: an epoch order that reads a few shards at a time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from flowloader.distributed import DistributedSampler, world_or_single


class ShardSampler(DistributedSampler):
    """Each epoch: shuffle the order of the shards, then, ``window`` shards at a time,
    shuffle the samples of those shards among themselves. A reader then has at most
    ``window`` shards open at once and reads each once per epoch, and a remote shard is
    fetched once per epoch (the next window's shards are prefetched while this one is read,
    when the dataset can, e.g. :class:`ShardedDataset`).

    The trade-off: a sample moves at most about ``window`` shards from where it is stored,
    and neighbours in the order come from the same ``window`` shards; a larger window
    shuffles better (``window`` = the number of shards is a global permutation) and keeps
    more shards open. ``docs/design/shards.md`` measures it.

    With ``num_replicas``/``rank`` (or torch.distributed, or torchrun's WORLD_SIZE/RANK;
    else one rank) every rank takes an equal, disjoint share as DistributedSampler does,
    padding or dropping (``drop_last``) to make it even; a mid-epoch ``state_dict()``
    resumes exactly, onto another ``num_workers`` or another world size.
    """

    def __init__(
        self,
        dataset: Any,
        shuffle: bool = True,
        seed: int = 0,
        window: int = 4,
        num_replicas: int | None = None,
        rank: int | None = None,
        drop_last: bool = False,
    ) -> None:
        if not callable(getattr(dataset, "shard_sizes", None)):
            raise TypeError(
                f"ShardSampler needs a dataset that knows its shards (shard_sizes()), such as "
                f"ShardedDataset; got {type(dataset).__name__}"
            )
        if int(window) < 1:
            raise ValueError(f"window should be a positive number of shards, got {window}")
        if num_replicas is None and rank is None:
            num_replicas, rank = world_or_single()
        self.window = int(window)
        sizes = np.asarray(dataset.shard_sizes(), dtype=np.int64)
        self._shard_starts = np.concatenate([[0], np.cumsum(sizes)])
        super().__init__(dataset, num_replicas, rank, shuffle, seed, drop_last)

    def order_settings(self) -> dict[str, Any]:
        """flowloader.order's contract: DistributedSampler's and the window."""
        return {**super().order_settings(), "order": "shards", "window": self.window}

    def _epoch_order(self) -> np.ndarray:
        starts = self._shard_starts
        shards = len(starts) - 1
        rng = np.random.default_rng([self.seed, self.epoch])
        order = rng.permutation(shards) if self.shuffle else np.arange(shards)
        pieces = []
        for first in range(0, shards, self.window):
            group = order[first : first + self.window]
            indices = np.concatenate([np.arange(starts[s], starts[s + 1]) for s in group])
            pieces.append(rng.permutation(indices) if self.shuffle else indices)
        return np.concatenate(pieces) if pieces else np.arange(0)

    def __iter__(self) -> Iterator[int]:
        indices = list(super().__iter__())
        prefetch = getattr(self.dataset, "prefetch", None)
        if not callable(prefetch) or not indices:
            yield from indices
            return
        shard_of = np.searchsorted(self._shard_starts, indices, side="right") - 1
        first_seen = np.unique(shard_of, return_index=True)[1]
        upcoming = shard_of[np.sort(first_seen)].tolist()  # shards in the order they come
        announced = 0
        for position, index in enumerate(indices):
            shard = int(shard_of[position])
            if announced < len(upcoming) and shard == upcoming[announced]:
                prefetch(upcoming[announced : announced + 1 + self.window])
                announced += 1
            yield index
