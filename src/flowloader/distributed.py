"""DistributedSampler: each of ``num_replicas`` processes reads its own share of the dataset."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from ._compat import torch as _torch
from .sampler import Sampler

__all__ = ["DistributedSampler"]


def _from_torch_distributed() -> tuple[int, int] | None:
    """(world size, rank) from torch.distributed when the user's program initialised it."""
    torch = _torch.imported_torch()
    dist = getattr(torch, "distributed", None) if torch is not None else None
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist.get_world_size(), dist.get_rank()


def _from_jax() -> tuple[int, int] | None:
    """(process count, process index) from JAX where the user's program imported it and
    initialised ``jax.distributed`` (JAX is never imported here)."""
    jax = sys.modules.get("jax")
    initialized = getattr(getattr(jax, "distributed", None), "is_initialized", None)
    if jax is None or not callable(initialized) or not initialized():
        return None
    return int(jax.process_count()), int(jax.process_index())


def _from_environment() -> tuple[int, int] | None:
    """(world size, rank) from the WORLD_SIZE / RANK variables that torchrun sets."""
    world, rank = os.environ.get("WORLD_SIZE"), os.environ.get("RANK")
    if world is None or rank is None:
        return None
    try:
        return int(world), int(rank)
    except ValueError:
        raise ValueError(
            f"WORLD_SIZE={world!r} and RANK={rank!r} must be integers (torchrun sets them to "
            "the world size and this process's rank)"
        ) from None


def _found_world() -> tuple[int, int] | None:
    """(world size, rank): torch.distributed if initialised, else ``jax.distributed`` if
    initialised, else torchrun's environment; None where none says. torch.distributed and JAX
    both initialised with another world or rank is a ValueError (which should the data be
    split by?)."""
    torch_world, jax_world = _from_torch_distributed(), _from_jax()
    if torch_world and jax_world and torch_world != jax_world:
        raise ValueError(
            f"torch.distributed says world size {torch_world[0]}, rank {torch_world[1]}, but "
            f"jax.distributed says process count {jax_world[0]}, index {jax_world[1]}: pass "
            "num_replicas and rank explicitly to say how to split the data"
        )
    return torch_world or jax_world or _from_environment()


def detect_world() -> tuple[int, int]:
    """(world size, rank) as :func:`_found_world` finds them, else an error."""
    found = _found_world()
    if found is None:
        raise ValueError(
            "DistributedSampler could not find num_replicas and rank: pass them explicitly, "
            "initialise torch.distributed or jax.distributed, or launch with torchrun (which "
            "sets WORLD_SIZE and RANK)"
        )
    return found


def world_or_single() -> tuple[int, int]:
    """(world size, rank) as detect_world finds them, else one rank: for samplers that deal
    to ranks when there are any and read everything alone otherwise. WORLD_SIZE and RANK set
    to something other than integers are an error, not one rank (every process would read
    everything)."""
    return _found_world() or (1, 0)


class DistributedSampler(Sampler[int]):
    """PyTorch's DistributedSampler over NumPy.

    Every rank shuffles with the same ``seed + epoch`` and takes every ``num_replicas``-th index
    starting at its rank. Without ``drop_last`` the index list is padded by repeating its start
    so that all ranks get the same number of samples; with it, the tail is cut instead. Call
    :meth:`set_epoch` at the start of each epoch to get a new order.
    """

    def __init__(
        self,
        dataset: Any,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if num_replicas is None or rank is None:
            world, detected_rank = detect_world()
            num_replicas = world if num_replicas is None else num_replicas
            rank = detected_rank if rank is None else rank
        if num_replicas <= 0:
            raise ValueError(f"num_replicas must be positive, but got num_replicas={num_replicas}")
        if rank >= num_replicas or rank < 0:
            raise ValueError(
                f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]"
            )
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        self.shuffle = shuffle
        self.seed = seed
        # Where in the epoch's order the next pass begins: 0 but for a resume on a different
        # world size (see restart_after); set_epoch starts a new epoch from the beginning.
        self.start = 0
        self._saved_replicas = num_replicas

    @property
    def _size(self) -> int:
        """The dataset's length now: a dataset whose length follows the epoch (packed rows)
        is dealt out at its length in each epoch."""
        return len(self.dataset)

    @property
    def num_samples(self) -> int:
        """Samples per rank in a whole epoch (PyTorch's attribute)."""
        return self._pass_length(0)

    @property
    def total_size(self) -> int:
        """Samples of all ranks in a whole epoch, padding included (PyTorch's attribute)."""
        return self.num_samples * self.num_replicas

    def __iter__(self) -> Iterator[int]:
        indices = self._pass_indices(self.start)
        self.start = 0  # a position restored from another world size holds for one pass
        return iter(indices[self.rank :: self.num_replicas].tolist())

    def _pass_indices(self, start: int) -> np.ndarray:
        """Every rank's indices for a pass that begins ``start`` places into the epoch's order,
        interleaved (rank r takes every num_replicas-th from r). The order is extended by
        repeating its start, so that with ``start=0`` this is PyTorch's padding rule exactly."""
        order = self._epoch_order()
        count = self._pass_length(start) * self.num_replicas
        return np.resize(order, start + count)[start:] if count else order[:0]

    def _epoch_order(self) -> np.ndarray:
        """Every index of the dataset, in this epoch's order (before it is dealt out)."""
        if self.shuffle:
            return np.random.default_rng(self.seed + self.epoch).permutation(self._size)
        return np.arange(self._size)

    def _pass_length(self, start: int, replicas: int | None = None) -> int:
        """Samples per rank in a pass beginning at ``start`` (num_samples when it is 0), over
        ``replicas`` ranks (this world's by default)."""
        remaining = self._size - start
        replicas = replicas or self.num_replicas
        if self.drop_last:
            return remaining // replicas
        return math.ceil(remaining / replicas)

    def __len__(self) -> int:
        return self._pass_length(self.start)

    def state_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "seed": self.seed,
            "num_replicas": self.num_replicas,
            "start": self.start,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch, self.seed = int(state["epoch"]), int(state["seed"])
        self.start = int(state.get("start", 0))
        self._saved_replicas = int(state.get("num_replicas", self.num_replicas))

    def restart_after(self, samples_per_rank: int, regroup: bool = False) -> bool:
        """Continue a pass that was saved after every rank of the saved world had taken
        ``samples_per_rank`` samples. Same world size and batch size: returns False and the
        loader skips what was delivered (exactly the uninterrupted order). Another world
        size, or ``regroup`` (another batch size): the samples not yet delivered are dealt out
        again over this world, each rank getting as many (padding or dropping as this
        sampler's ``drop_last`` says), and True is returned."""
        if self._saved_replicas == self.num_replicas and not regroup:
            return False
        per_rank = min(samples_per_rank, self._pass_length(self.start, self._saved_replicas))
        self.start = min(self.start + per_rank * self._saved_replicas, self._size)
        self._saved_replicas = self.num_replicas
        return True

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch; with ``shuffle=True`` each epoch gives every rank a new order. The
        DataLoader calls it with its own epoch; calling it yourself, as with PyTorch, works
        too (the loader takes your number)."""
        self.epoch = epoch
        self.start = 0

    def read_state(self, state: dict[str, Any], taken: int) -> dict[str, Any]:
        """flowloader.order's contract: unshuffled, every rank's first ``taken`` samples after
        the pass's start are the positions below ``start + taken * num_replicas``; shuffled,
        they are scattered once anything is read."""
        start = int(state.get("start", 0)) if state else 0
        if self.shuffle:
            return {"prefix": 0 if start == 0 and taken == 0 else None}
        replicas = int(state.get("num_replicas", self.num_replicas)) if state else 1
        return {"prefix": start + taken * replicas}

    def order_settings(self) -> dict[str, Any]:
        """flowloader.order's contract: what changes the order. The seed is the state's (a
        resume restores it), ``drop_last`` only cuts or pads the end, and the world size may
        change (what is left is dealt out again)."""
        return {"order": "distributed", "shuffle": self.shuffle}


def dealt_positions(sampler: DistributedSampler, chunk: int = 1 << 16) -> Iterator[np.ndarray]:
    """The epoch positions of ``sampler``'s rank for its pass, ``chunk`` at a time: rank r
    takes every num_replicas-th position from the pass's start, padded by wrapping (as
    DistributedSampler deals them). For samplers that compute each position's index
    (BlockShuffleSampler, the video clip samplers) instead of listing the epoch; a start
    restored from another world size holds for this one pass."""
    start, sampler.start = sampler.start, 0
    count = sampler._pass_length(start)
    size = max(sampler._size, 1)
    for first in range(0, count, chunk):
        k = np.arange(first, min(first + chunk, count), dtype=np.int64)
        yield (start + sampler.rank + k * sampler.num_replicas) % size


def splits_by_rank(sampler: Any) -> bool:
    """True if ``sampler`` gives each rank its own part of the data: a DistributedSampler
    (ours, a ShardSampler, or torch's), a batch sampler over one, or a sampler of the user's
    that says so with a true ``splits_by_rank`` attribute."""
    if sampler is None:
        return False
    if getattr(sampler, "splits_by_rank", False) or isinstance(sampler, DistributedSampler):
        return True
    torch_distributed = sys.modules.get("torch.utils.data.distributed")
    torch_sampler = getattr(torch_distributed, "DistributedSampler", None)
    if torch_sampler is not None and isinstance(sampler, torch_sampler):
        return True
    inner = getattr(sampler, "sampler", None)  # a BatchSampler's
    return inner is not None and inner is not sampler and splits_by_rank(inner)


def duplicated_across_ranks(sampler: Any, batch_sampler: Any) -> int | None:
    """The world size when torch.distributed runs on more than one rank and neither sampler
    splits the data by rank (every rank would load the whole dataset), else None."""
    world = _from_torch_distributed()
    if world is None or world[0] <= 1:
        return None
    if splits_by_rank(sampler) or splits_by_rank(batch_sampler):
        return None
    return world[0]
