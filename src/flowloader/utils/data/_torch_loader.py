"""The drop-in's DataLoader where torch is installed: flowloader's engine, torch's type.

It is a ``torch.utils.data.DataLoader`` subclass (``dataset`` first, torch's parameter names),
so frameworks that check for torch's loader treat it as one: Lightning re-creates it with a
DistributedSampler under DDP, Accelerate's ``prepare`` shards it. What it builds where the
user passes nothing is torch's: torch's samplers, the tensor ``default_collate``, and a
``torch.Generator`` seeded once per loader from torch's global RNG, so ``torch.manual_seed``
reproduces a run and a framework's extra ``iter()`` on another loader does not shift this
loader's later epochs.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import torch
import torch.utils.data as _td

import flowloader
from flowloader import _plan
from flowloader._compat import torch as _torch

from . import _torch_collate
from ._torch_samplers import BatchSampler, RandomSampler, SequentialSampler

T_co = TypeVar("T_co", covariant=True)

__all__ = ["DataLoader"]


def seeded_generator() -> torch.Generator:
    """A generator of the loader's own, seeded from torch's global RNG (one draw)."""
    return torch.Generator().manual_seed(_torch.draw_seed(None))


_TORCH_SAMPLERS = _plan.Defaults(
    random_sampler=RandomSampler,
    sequential_sampler=SequentialSampler,
    batch_sampler=BatchSampler,
    generator=seeded_generator,
)
# With output="torch" (the default here), batches are collated into tensors as in torch.
_TORCH_DEFAULTS = dataclasses.replace(
    _TORCH_SAMPLERS,
    collate=_torch_collate.default_collate,
    convert=_torch_collate.default_convert,
)


class DataLoader(flowloader.DataLoader[T_co], _td.DataLoader[T_co]):  # type: ignore[misc]
    """``flowloader.DataLoader`` as a ``torch.utils.data.DataLoader``: batches are torch
    tensors (``output="torch"`` by default), built with torch's samplers and seeds."""

    def __init__(self, *args: Any, output: str = "torch", **kwargs: Any) -> None:
        super().__init__(*args, output=output, **kwargs)

    def _defaults(self, output: str) -> _plan.Defaults:
        return _TORCH_DEFAULTS if output == "torch" else _TORCH_SAMPLERS
