"""BlockShuffleSampler: a shuffle that keeps a table's row groups together, as arithmetic.

Each epoch visits the blocks (a table's row groups, or runs of ``block_size`` rows) in a
keyed random order and, ``window`` blocks at a time, permutes the rows of those blocks among
themselves. A reader then decodes each block about once per epoch and worker (it stays in
the dataset's cache while its window is read) where a full shuffle decodes a block for
almost every row once the table outgrows the cache.

Position p of the epoch is computed, not looked up: which window holds p (the windows' row
counts, one number per window), p's place in that window under the window's keyed
permutation (``flowloader.permutation``), and the block and row at that place. Only per-block
numbers are kept (the block order, its running row counts); positions are computed a chunk
at a time, so an epoch over 10^9 rows costs no array of 10^9 entries. Dealing to ranks,
padding, ``drop_last``, ``state_dict()`` and resume onto another world size are
DistributedSampler's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .distributed import DistributedSampler, dealt_positions, world_or_single
from .permutation import name_hash, pass_keys, permute

_BLOCKS = name_hash("flowloader.BlockShuffleSampler.blocks")
_WINDOWS = name_hash("flowloader.BlockShuffleSampler.windows")


class BlockShuffleSampler(DistributedSampler):
    """Shuffle within windows of ``window`` blocks, the blocks in a random order; a new
    order each epoch (``set_epoch``, or the loader's epoch).

    ``dataset_or_len``: a dataset (its length; its blocks from ``block_sizes()``, such as a
    ``flowloader.tables`` table's row groups, unless ``block_size`` is given) or a length
    (then ``block_size`` is required). ``window=1`` shuffles within each block;
    ``window >= the number of blocks`` is a full shuffle. With ``num_replicas``/``rank``
    (found from torch.distributed or torchrun by default, else one rank) each rank takes
    every ``num_replicas``-th position, as DistributedSampler deals them.
    """

    def __init__(
        self,
        dataset_or_len: Any,
        *,
        block_size: int | None = None,
        window: int = 8,
        seed: int = 0,
        shuffle: bool = True,
        num_replicas: int | None = None,
        rank: int | None = None,
        drop_last: bool = False,
    ) -> None:
        if isinstance(dataset_or_len, (int, np.integer)):
            if int(dataset_or_len) < 0:
                raise ValueError(f"the length should be >= 0, got {dataset_or_len}")
            dataset: Any = range(int(dataset_or_len))
        else:
            dataset = dataset_or_len
        if isinstance(window, bool) or int(window) < 1:
            raise ValueError(f"window should be a positive number of blocks, got {window}")
        self.window = int(window)
        if block_size is not None and (isinstance(block_size, bool) or int(block_size) < 1):
            raise ValueError(f"block_size should be a positive number of rows, got {block_size}")
        self.block_size = None if block_size is None else int(block_size)
        if self.block_size is None:
            sizes = getattr(dataset, "block_sizes", None)
            if not callable(sizes):
                raise TypeError(
                    f"BlockShuffleSampler needs block_size=... for a {type(dataset).__name__}, "
                    "which has no blocks of its own (block_sizes(), as flowloader.tables' "
                    "datasets have)"
                )
            self._own_starts = np.concatenate([[0], np.cumsum(sizes(), dtype=np.int64)])
        if num_replicas is None and rank is None:
            num_replicas, rank = world_or_single()
        super().__init__(dataset, num_replicas, rank, shuffle, seed, drop_last)
        self._epoch_plan: tuple[tuple[int, ...], tuple[np.ndarray, ...]] | None = None
        self._checked_starts()

    @property
    def _block_starts(self) -> np.ndarray:
        """The first row of each block, then the row count: runs of ``block_size`` rows over
        the dataset's length now (which may follow the epoch), or the dataset's blocks."""
        if self.block_size is None:
            return self._own_starts
        return np.append(np.arange(0, self._size, self.block_size, dtype=np.int64), self._size)

    def _checked_starts(self) -> np.ndarray:
        """``_block_starts``, once they are seen to hold the dataset's rows."""
        starts = self._block_starts
        if int(starts[-1]) != self._size:
            raise ValueError(
                f"the dataset's blocks hold {int(starts[-1])} rows, but it has {self._size}"
            )
        return starts

    @property
    def num_blocks(self) -> int:
        return len(self._block_starts) - 1

    # -- the order, position by position -------------------------------------------------

    def indices_at(self, positions: np.ndarray) -> np.ndarray:
        """The dataset index at each of ``positions`` (in ``range(len(dataset))``) of this
        epoch's order."""
        positions = np.asarray(positions, dtype=np.int64)
        if not self.shuffle:
            return positions.copy()
        starts, blocks, virtual_starts, window_firsts, window_rows = self._plan()
        window = np.searchsorted(window_firsts, positions, side="right") - 1
        streams = np.uint64(_WINDOWS) ^ window.astype(np.uint64)
        keys = pass_keys(self.seed, streams, np.full(window.shape, self.epoch))
        first = window_firsts[window]
        placed = first + permute(positions - first, window_rows[window], keys)
        slot = np.searchsorted(virtual_starts, placed, side="right") - 1
        return starts[blocks[slot]] + (placed - virtual_starts[slot])

    def _plan(self) -> tuple[np.ndarray, ...]:
        """The blocks' first rows, this epoch's block order, the running row counts along
        it, and each window's first position and rows: numbers per block, computed once per
        epoch."""
        made_for = (self.epoch, self._size, self.seed, self.window)  # a state may set the seed
        if self._epoch_plan is not None and self._epoch_plan[0] == made_for:
            return self._epoch_plan[1]
        starts = self._checked_starts()
        count = len(starts) - 1
        key = pass_keys(self.seed, np.array([_BLOCKS], dtype=np.uint64), np.array([self.epoch]))
        blocks = permute(np.arange(count), np.array(count), key)
        sizes = np.diff(starts)[blocks]
        virtual_starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        window_firsts = virtual_starts[: count : self.window]
        window_rows = np.diff(np.append(window_firsts, self._size))
        plan = (starts, blocks, virtual_starts, window_firsts, window_rows)
        self._epoch_plan = (made_for, plan)
        return plan

    def _epoch_order(self) -> np.ndarray:
        return self.indices_at(np.arange(self._size, dtype=np.int64))

    def __iter__(self) -> Iterator[int]:
        """This rank's indices, computed a chunk at a time."""
        for positions in dealt_positions(self):
            yield from self.indices_at(positions).tolist()

    def order_settings(self) -> dict[str, Any]:
        """flowloader.order's contract: DistributedSampler's, the window and the blocks'
        size (the blocks themselves are the dataset's, which describes its files)."""
        return {
            **super().order_settings(),
            "order": "block shuffle",
            "window": self.window,
            "block_size": self.block_size,
        }
