"""Randomness sources: turn the user's ``generator`` argument into NumPy generators and seeds.

``generator`` may be an ``int`` seed, a ``numpy.random.Generator``, a ``torch.Generator`` (for
code ported from PyTorch) or ``None``. ``None`` draws from NumPy's global RNG, the way PyTorch
draws from its global RNG, so ``np.random.seed`` makes an unseeded pipeline reproducible.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from ._compat import torch as _torch

# int seed, numpy.random.Generator, torch.Generator, or None.
GeneratorLike = Any

SEED_BOUND = 2**63 - 1


def resolve_generator(generator: GeneratorLike, *, argument: str = "generator") -> Any:
    """Validate ``generator`` and turn an ``int`` seed into a ``numpy.random.Generator``.

    A ``numpy.random.Generator`` and a ``torch.Generator`` are kept as they are (shared state,
    as in PyTorch); ``None`` stays ``None``.
    """
    if generator is None or isinstance(generator, np.random.Generator):
        return generator
    if isinstance(generator, (int, np.integer)) and not isinstance(generator, bool):
        if generator < 0:
            raise ValueError(
                f"{argument} seed must be non-negative, but got {argument}={generator}"
            )
        return np.random.default_rng(int(generator))
    if _torch.is_generator(generator):
        return generator
    raise TypeError(
        f"{argument} must be an int seed, a numpy.random.Generator, a torch.Generator or None, "
        f"but got {type(generator).__name__}"
    )


def draw_seed(generator: Any) -> int:
    """Draw a fresh non-negative 63-bit seed, advancing ``generator`` (or NumPy's global RNG)."""
    if generator is None:
        return int(np.random.randint(0, SEED_BOUND, dtype=np.int64))
    if isinstance(generator, np.random.Generator):
        return int(generator.integers(0, SEED_BOUND, dtype=np.int64))
    return _torch.draw_seed(generator)


def seed_worker(base_seed: int, worker_id: int) -> int:
    """Seed a worker's global RNGs: Python's ``random``, NumPy's legacy global RNG, and torch's
    (now if torch is imported, else when the dataset imports it). Returns the worker seed,
    ``base_seed + worker_id``.

    NumPy's state comes from a SeedSequence of (base seed, worker id), so no two workers share
    a stream and the same loader seed gives the same draws.
    """
    seed = base_seed + worker_id
    random.seed(seed)
    np.random.seed(np.random.SeedSequence([base_seed, worker_id]).generate_state(4))
    _torch.when_imported(lambda torch: torch.manual_seed(seed))
    return seed


def numpy_rng(generator: Any) -> np.random.Generator:
    """A NumPy generator to draw from: ``generator`` itself if it is one, else a fresh one
    seeded by :func:`draw_seed` (from a ``torch.Generator`` or the global NumPy RNG)."""
    if isinstance(generator, np.random.Generator):
        return generator
    return np.random.default_rng(draw_seed(generator))
