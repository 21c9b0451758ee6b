"""Where random transforms draw from: an explicit ``numpy.random.Generator``, or by default
NumPy's global RNG (which every DataLoader worker seeds differently)."""

from __future__ import annotations

from typing import Any

import numpy as np


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
    return GLOBAL_RNG if rng is None else rng
