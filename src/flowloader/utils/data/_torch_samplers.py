"""The drop-in's samplers where torch is installed: torch's classes, with what a flowloader
loader adds (a ``state_dict`` for exact resume).

The random samplers are torch's own, so the same ``torch.Generator`` seed (or
``torch.manual_seed``, without one) gives torch's indices; their state is the generator's
(torch's global one when ``generator=None``). ``SequentialSampler`` and ``BatchSampler`` are
flowloader's, and ``DistributedSampler`` is flowloader's (it resumes onto another world size)
shuffling with torch's ``randperm``, so every rank of a mixed job sees torch's order. Each is
also ``torch.utils.data``'s type, which frameworks check (Lightning injects its distributed
sampler only for torch's ``RandomSampler``/``SequentialSampler``).
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np
import torch
import torch.utils.data as _td
import torch.utils.data.distributed as _td_distributed

from flowloader import _seed
from flowloader import distributed as _core_distributed
from flowloader import sampler as _core

T_co = TypeVar("T_co", covariant=True)

__all__ = [
    "BatchSampler",
    "DistributedSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
]


class Sampler(_core.Sampler[T_co], _td.Sampler[T_co]):
    """Base class of samplers: flowloader's, also a ``torch.utils.data.Sampler``."""


class _TorchGeneratorState:
    """``state_dict`` for a torch sampler that draws from ``self.generator``, or from torch's
    global RNG when it is None (``torch.default_generator`` is that RNG)."""

    generator: Any

    def _drawing_from(self) -> Any:
        return self.generator if self.generator is not None else torch.default_generator

    def state_dict(self) -> dict[str, Any]:
        return {"generator": _seed.generator_state(self._drawing_from())}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        _seed.restore_generator(self._drawing_from(), state["generator"])


class SequentialSampler(_core.SequentialSampler, Sampler[int], _td.SequentialSampler):
    """Indices ``0 .. len(data_source) - 1`` in order."""


class RandomSampler(_TorchGeneratorState, _td.RandomSampler, Sampler[int]):
    """torch's RandomSampler: the same indices as torch for the same generator or seed."""


class SubsetRandomSampler(_TorchGeneratorState, _td.SubsetRandomSampler, Sampler[int]):
    """torch's SubsetRandomSampler: the given indices in torch's random order."""


class WeightedRandomSampler(_TorchGeneratorState, _td.WeightedRandomSampler, Sampler[int]):
    """torch's WeightedRandomSampler: torch's draws for the same generator or seed."""


class BatchSampler(_core.BatchSampler, Sampler[list[int]], _td.BatchSampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size``."""


class DistributedSampler(  # type: ignore[override]  # torch's num_samples: an attribute
    _core_distributed.DistributedSampler, Sampler[int], _td_distributed.DistributedSampler
):
    """flowloader's DistributedSampler (finds the world from torch.distributed or torchrun,
    resumes onto another world size) with torch's shuffled order for ``seed + epoch``."""

    def _epoch_order(self) -> np.ndarray:
        if not self.shuffle:
            return np.arange(self._size)
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        return torch.randperm(self._size, generator=generator).numpy()
