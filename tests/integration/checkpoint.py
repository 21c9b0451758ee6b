"""The checkpoint round trip, shared by the checkpoint tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

import flowloader as fl


def as_bytes(batch: Any) -> bytes:
    if isinstance(batch, (list, tuple)):
        return b"|".join(as_bytes(b) for b in batch)
    return np.ascontiguousarray(batch).tobytes()


def epochs(loader: fl.DataLoader, count: int) -> list[bytes]:
    return [as_bytes(b) for _ in range(count) for b in loader]


def round_trip(
    make_loader: Callable[[int], fl.DataLoader],
    stop_epoch: int,
    stop_batch: int,
    workers_before: int,
    workers_after: int,
    total_epochs: int = 3,
) -> None:
    """Stop after ``stop_batch`` batches of epoch ``stop_epoch``, save, restore into a fresh
    loader (possibly with another num_workers) and check every later batch's bytes."""
    reference = epochs(make_loader(workers_before), total_epochs)
    per_epoch = len(reference) // total_epochs

    first = make_loader(workers_before)
    delivered = epochs(first, stop_epoch)
    iterator = iter(first)
    for _ in range(stop_batch):
        delivered.append(as_bytes(next(iterator)))
    state = json.loads(json.dumps(first.state_dict()))  # must survive JSON
    del iterator, first

    resumed = make_loader(workers_after)
    resumed.load_state_dict(state)
    rest = [as_bytes(b) for b in resumed]  # the rest of the interrupted epoch
    rest += epochs(resumed, total_epochs - stop_epoch - 1)
    assert delivered == reference[: stop_epoch * per_epoch + stop_batch]
    assert delivered + rest == reference
