"""Per-sample random generators that do not depend on ``num_workers``, handed to the code that
loads a sample instead of found in module state.

In an epoch, sample ``i``'s generator is NumPy's Philox keyed by (epoch seed, ``i``). The
loader draws the epoch seed in the main process, once per epoch, and passes it with every
batch as :class:`SampleSeeds`, so sample ``i`` gets the same generator whichever worker (or
none) loads it, and after a resume.

How a dataset receives its generators:

- ``__getitems__(indices, rngs=None)``: a dataset whose batch method takes ``rngs`` gets a
  :class:`SampleRngs`, ``rngs[k]`` being a fresh generator for ``indices[k]`` (the whole
  batch contract: :mod:`flowloader.batching`).
- ``__getitem__(index)`` (code written for torch): while sample ``i`` loads,
  :func:`sample_rng` returns its generator, which is what a random transform called without a
  generator draws from. That "current sample" is a ``ContextVar``: each thread sees its own.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "SampleRngs",
    "SampleSeeds",
    "sample_context",
    "sample_rng",
]

_MASK = (1 << 64) - 1
_ZEROS = (0, 0, 0, 0)


class SampleSeeds:
    """One epoch's randomness: the generator of any sample of that epoch."""

    __slots__ = ("epoch_seed",)

    def __init__(self, epoch_seed: int) -> None:
        self.epoch_seed = int(epoch_seed)

    def generator(self, index: int) -> np.random.Generator:
        """A fresh generator for sample ``index``: the same numbers every time it is asked."""
        # As uint64: NumPy converts a list mixing numbers above and below 2**63 through
        # float64, which loses the low bits (and wraps keys near 2**64 to 0).
        key = np.array([self.epoch_seed & _MASK, int(index) & _MASK], np.uint64)
        return np.random.Generator(np.random.Philox(key=key))

    def reset(self, generator: np.random.Generator, index: int) -> np.random.Generator:
        """``generator`` (one of :meth:`generator`'s) put back to sample ``index``'s first
        draw: the same numbers as a fresh ``generator(index)``, without building one (that
        costs some 7 µs, a tenth of what a planned JPEG sample spends in Python)."""
        generator.bit_generator.state = {
            "bit_generator": "Philox",
            "state": {"counter": _ZEROS, "key": (self.epoch_seed & _MASK, int(index) & _MASK)},
            "buffer": _ZEROS,
            "buffer_pos": 4,  # the buffer is empty: the next draw runs the counter
            "has_uint32": 0,
            "uinteger": 0,
        }
        return generator

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SampleSeeds) and other.epoch_seed == self.epoch_seed

    def __hash__(self) -> int:
        return hash(self.epoch_seed)

    def __repr__(self) -> str:
        return f"SampleSeeds({self.epoch_seed})"


class SampleRngs(Sequence):
    """The generators of a batch's samples, made when asked for (a batch that draws nothing
    builds none): ``rngs[k]`` is a fresh generator for ``indices[k]``. A dataset takes it once
    per sample and passes that generator on to everything the sample's load draws from."""

    __slots__ = ("indices", "seeds")

    def __init__(self, seeds: SampleSeeds, indices: Sequence[int]) -> None:
        self.seeds, self.indices = seeds, indices

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return SampleRngs(self.seeds, self.indices[k])
        return self.seeds.generator(self.indices[k])

    def for_indices(self, indices: Sequence[int]) -> SampleRngs:
        """The same epoch's generators for other indices (a wrapper's inner ones)."""
        return SampleRngs(self.seeds, indices)

    def one_at_a_time(self) -> Sequence[np.random.Generator]:
        """These generators for a loop that is done with each one before it asks for the
        next: one generator, reset to each sample's first draw (:meth:`SampleSeeds.reset`).
        Only for code that keeps no generator past its sample (no user code runs with it)."""
        return _Recycled(self.seeds, self.indices)


class _Recycled(Sequence):
    """:meth:`SampleRngs.one_at_a_time`: ``rngs[k]`` resets one generator for ``indices[k]``."""

    __slots__ = ("generator", "indices", "seeds")

    def __init__(self, seeds: SampleSeeds, indices: Sequence[int]) -> None:
        self.seeds, self.indices = seeds, indices
        self.generator: np.random.Generator | None = None

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            raise TypeError("one_at_a_time() generators are asked for one at a time")
        if self.generator is None:
            self.generator = self.seeds.generator(self.indices[k])
            return self.generator
        return self.seeds.reset(self.generator, self.indices[k])


class _Loading:
    """What :func:`sample_rng` answers from: the epoch's seeds, and the sample now loading
    with its generator (made at the first ask, then continued by every later ask)."""

    __slots__ = ("generator", "index", "seeds")

    def __init__(self, seeds: SampleSeeds | None, index: Any, generator: Any = None) -> None:
        self.seeds, self.index, self.generator = seeds, index, generator

    def current(self) -> np.random.Generator | None:
        if self.generator is None and self.seeds is not None and self.index is not None:
            self.generator = self.seeds.generator(self.index)
        return self.generator


_loading: contextvars.ContextVar[_Loading | None] = contextvars.ContextVar(
    "flowloader_loading", default=None
)


class sample_context:
    """Within the block, :func:`sample_rng` is sample ``index``'s generator (or ``rng``, when
    given). The loader enters it around every ``dataset[i]``; a dataset whose
    ``__getitems__`` loads samples one by one can wrap each load in it. ``seeds`` defaults to
    the seeds of the batch being fetched."""

    __slots__ = ("loading", "token")

    def __init__(self, index: Any, rng: Any = None, seeds: SampleSeeds | None = None) -> None:
        if seeds is None:
            outer = _loading.get()
            seeds = outer.seeds if outer is not None else None
        self.loading = _Loading(seeds, index, rng)

    def __enter__(self) -> None:
        self.token = _loading.set(self.loading)

    def __exit__(self, *exc: object) -> None:
        _loading.reset(self.token)


def sample_rng(index: int | None = None) -> np.random.Generator | None:
    """The generator of the sample being loaded (the same one for every ask during that
    load), or a fresh one for sample ``index`` of this epoch.

    None outside a DataLoader, or when the sample has no index (IterableDataset streams): then
    draw from NumPy's global RNG, which every worker seeds differently.
    """
    loading = _loading.get()
    if loading is None:
        return None
    if index is not None:
        return None if loading.seeds is None else loading.seeds.generator(index)
    return loading.current()
