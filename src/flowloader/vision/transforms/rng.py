"""Where a random transform draws from, in order of precedence:

1. its own ``rng``, when it was built with one;
2. the generator handed to the call, ``transform(img, rng=...)``: what the planner and the
   datasets' batch paths pass (each sample's generator from the loader, see
   :mod:`flowloader.randomness`);
3. for a call written for torch, ``transform(img)`` inside ``__getitem__``: the generator of
   the sample being loaded, ``flowloader.sample_rng()``;
4. NumPy's global RNG (outside a DataLoader).
"""

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

    def standard_normal(self, size: Any = None, dtype: Any = np.float64) -> Any:
        return np.random.standard_normal(size).astype(dtype)

    def beta(self, a: float, b: float) -> float:
        return float(np.random.beta(a, b))


GLOBAL_RNG = GlobalNumPyRNG()


def resolve(own: Any, given: Any = None) -> Any:
    """The generator a draw uses: ``own`` (the transform's), else ``given`` (the call's), else
    the loading sample's, else NumPy's global RNG."""
    if own is not None:
        return own
    if given is not None:
        return given
    current = flowloader.sample_rng()
    return GLOBAL_RNG if current is None else current
