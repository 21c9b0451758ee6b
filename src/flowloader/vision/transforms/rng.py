"""Where random transforms draw from: an explicit ``numpy.random.Generator``; else, inside a
DataLoader, the generator of the sample being loaded (``flowloader.sample_rng()``: the same
whatever ``num_workers``); else NumPy's global RNG."""

from __future__ import annotations

from typing import Any

import numpy as np

import flowloader


class GlobalNumPyRNG:
    """The ``numpy.random.Generator`` methods the transforms use, over NumPy's global RNG."""

    def random(self, size: Any = None) -> Any:
        return np.random.random(size)

    def integers(self, low: int, high: int) -> int:
        return int(np.random.randint(low, high))

    def uniform(self, low: float, high: float) -> float:
        return float(np.random.uniform(low, high))

    def permutation(self, n: int) -> np.ndarray:
        return np.random.permutation(n)


GLOBAL_RNG = GlobalNumPyRNG()


def resolve(rng: np.random.Generator | None) -> Any:
    if rng is not None:
        return rng
    sample = flowloader.sample_rng()
    return GLOBAL_RNG if sample is None else sample


class PerSample:
    """Marks transforms that draw from each sample's own generator (batch path)."""


PER_SAMPLE = PerSample()


def batch_source(rng: np.random.Generator | None) -> Any:
    """What a random step draws from when a whole batch is transformed at once."""
    if rng is not None:
        return rng
    if flowloader.sample_rng(0) is not None:  # inside a loader: per-sample generators
        return PER_SAMPLE
    return GLOBAL_RNG
