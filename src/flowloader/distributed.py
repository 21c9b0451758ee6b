"""DistributedSampler: each of ``num_replicas`` processes reads its own share of the dataset."""

from __future__ import annotations

import math
import os
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


def _from_environment() -> tuple[int, int] | None:
    """(world size, rank) from the WORLD_SIZE / RANK variables that torchrun sets."""
    world, rank = os.environ.get("WORLD_SIZE"), os.environ.get("RANK")
    if world is None or rank is None:
        return None
    try:
        return int(world), int(rank)
    except ValueError:
        raise ValueError(
            f"WORLD_SIZE={world!r} and RANK={rank!r} must be integers for DistributedSampler"
        ) from None


def detect_world() -> tuple[int, int]:
    """(world size, rank): torch.distributed if initialised, else torchrun's environment."""
    found = _from_torch_distributed() or _from_environment()
    if found is None:
        raise ValueError(
            "DistributedSampler could not find num_replicas and rank: pass them explicitly, "
            "initialise torch.distributed, or launch with torchrun (which sets WORLD_SIZE and RANK)"
        )
    return found


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
        size = len(dataset)
        if drop_last and size % num_replicas != 0:
            self.num_samples = math.ceil((size - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(size / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        size = len(self.dataset)
        if self.shuffle:
            indices = np.random.default_rng(self.seed + self.epoch).permutation(size)
        else:
            indices = np.arange(size)
        if self.drop_last:
            indices = indices[: self.total_size]
        elif self.total_size > size:
            indices = np.resize(indices, self.total_size)  # repeats from the start
        if len(indices) != self.total_size:
            raise AssertionError(
                f"DistributedSampler expected {self.total_size} indices but has {len(indices)}; "
                "did the dataset change length?"
            )
        return iter(indices[self.rank : self.total_size : self.num_replicas].tolist())

    def __len__(self) -> int:
        return self.num_samples

    def state_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "seed": self.seed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epoch, self.seed = int(state["epoch"]), int(state["seed"])

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch; with ``shuffle=True`` each epoch gives every rank a new order."""
        self.epoch = epoch
