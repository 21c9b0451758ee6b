"""Split a stream between every (rank, worker) pair, so that no sample is read twice."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from ._worker.info import get_worker_info
from .distributed import detect_world

T = TypeVar("T")

__all__ = ["shard_stream"]


def shard_stream(
    items: Iterable[T], num_replicas: int | None = None, rank: int | None = None
) -> Iterator[T]:
    """The items of ``items`` that belong to this process and DataLoader worker.

    Item ``k`` goes to shard ``k % (num_replicas * num_workers)``, where the shard of worker
    ``w`` on rank ``r`` is ``r * num_workers + w``. Rank and world size come from the arguments,
    else from torch.distributed or torchrun's environment, else a single process. Call it in an
    IterableDataset's ``__iter__``::

        def __iter__(self):
            return fl.shard_stream(read_records(self.files))
    """
    if num_replicas is None or rank is None:
        try:
            world, detected = detect_world()
        except ValueError:
            world, detected = 1, 0
        num_replicas = world if num_replicas is None else num_replicas
        rank = detected if rank is None else rank
    info: Any = get_worker_info()
    workers, worker_id = (info.num_workers, info.id) if info is not None else (1, 0)
    return itertools.islice(items, rank * workers + worker_id, None, num_replicas * workers)
