"""The random generator of the sample being loaded, derived from (epoch seed, sample index).

The epoch seed is drawn from the loader's generator in the main process, once per epoch, and
sent with every task, so sample ``i`` gets the same generator whichever worker (or none)
loads it: random transforms give the same bytes for any ``num_workers`` and after a resume.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

_MASK = (1 << 64) - 1

_epoch_seed: int | None = None
_index: Any = None
# The generator of the sample being loaded: every ask during one load continues one stream;
# each new load (set_index) starts a fresh one, so no load sees another's draws.
_current: np.random.Generator | None = None


def set_epoch_seed(seed: int | None) -> None:
    global _epoch_seed
    _epoch_seed = seed


def set_index(index: Any) -> None:
    """The index (or the list of indices, for a whole batch) now being loaded; None: none."""
    global _index, _current
    _index = index
    _current = None


class sample_context:
    """Within the block, ``sample_rng()`` is sample ``index``'s generator. For datasets whose
    ``__getitems__`` loads samples one by one: wrap each in it."""

    __slots__ = ("index", "previous")

    def __init__(self, index: int) -> None:
        self.index = index

    def __enter__(self) -> None:
        self.previous = _index
        set_index(self.index)

    def __exit__(self, *exc: object) -> None:
        set_index(self.previous)


def load_one_by_one(
    dataset: Any,
    indices: Sequence[int],
    skip: tuple[type[Exception], ...] = (),
    skipped: list[tuple[int, Exception]] | None = None,
) -> list[Any]:
    """``[dataset[i] for i in indices]``, each load with sample ``i``'s own generator: what a
    batch path falls back to when it cannot take the batch whole. A load that raises one of
    ``skip`` is left out and appended to ``skipped`` as (index, error)."""
    samples = []
    with sample_context(None):
        for i in indices:
            set_index(i)
            try:
                samples.append(dataset[i])
            except skip as error:
                assert skipped is not None
                skipped.append((i, error))
    return samples


def generator_for(index: int) -> np.random.Generator:
    """A fresh generator for sample ``index`` in the current epoch."""
    assert _epoch_seed is not None
    return np.random.Generator(np.random.Philox(key=[_epoch_seed & _MASK, int(index) & _MASK]))


def sample_rng(index: int | None = None) -> np.random.Generator | None:
    """The generator of the sample being loaded in this epoch (the same one for every ask
    during that load), or a fresh one for sample ``index``.

    None outside a DataLoader, or when the sample has no index (IterableDataset streams): then
    draw from NumPy's global RNG, which every worker seeds differently.
    """
    global _current
    if _epoch_seed is None:
        return None
    if index is not None:
        return generator_for(index)
    if _index is None or isinstance(_index, list):
        return None
    if _current is None:
        _current = generator_for(_index)
    return _current
