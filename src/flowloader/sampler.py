"""Samplers with PyTorch's semantics: which dataset indices to load, and in what order."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any, Generic, TypeVar

import numpy as np

from . import _seed
from .order import order_changes, read_state

T_co = TypeVar("T_co", covariant=True)

__all__ = [
    "BatchSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
]

# Random indices are drawn in chunks so that a huge num_samples never materialises at once.
_DRAW_CHUNK = 1 << 16


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and bool(value > 0)


class Sampler(Generic[T_co]):
    """Base class: an iterable over dataset indices (or lists of them), optionally sized."""

    def __init__(self, data_source: Sized | None = None) -> None:
        if data_source is not None:
            warnings.warn(
                "Sampler's data_source argument is unused; subclasses keep what they need.",
                stacklevel=2,
            )

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class _DrawingSampler(Sampler[int]):
    """A sampler that draws its order from ``self.generator``: where it stands is the
    generator's state (taken before each epoch's draws, see DataLoader.state_dict)."""

    generator: Any

    def state_dict(self) -> dict[str, Any]:
        return {"generator": _seed.generator_state(self.generator)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        _seed.restore_generator(self.generator, state["generator"])


class SequentialSampler(Sampler[int]):
    """Indices ``0 .. len(data_source) - 1`` in order."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)

    def read_state(self, state: Any, taken: int) -> dict[str, Any]:
        """The first ``taken`` positions (flowloader.order's contract)."""
        return {"prefix": taken}


class RandomSampler(_DrawingSampler):
    """A random permutation of the indices, or ``num_samples`` draws with replacement.

    Without replacement and with ``num_samples > len(data_source)``, whole permutations are
    concatenated. ``generator`` is an int seed, a ``numpy.random.Generator``, or None for a fresh
    order each epoch drawn from NumPy's global RNG.
    """

    def __init__(
        self,
        data_source: Sized,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: _seed.GeneratorLike = None,
    ) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = _seed.resolve_generator(generator)
        if not isinstance(replacement, bool):
            raise TypeError(
                f"replacement should be a boolean value, but got replacement={replacement!r}"
            )
        if not _is_positive_int(self.num_samples):
            raise ValueError(
                "num_samples should be a positive integer value, but got "
                f"num_samples={self.num_samples!r}"
                + (" (the dataset is empty)" if num_samples is None else "")
            )

    @property
    def num_samples(self) -> int:
        if self._num_samples is None:
            return len(self.data_source)
        return self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        if n == 0:
            raise ValueError("RandomSampler cannot draw indices from an empty dataset")
        rng = _seed.numpy_rng(self.generator)
        total = int(self.num_samples)
        if self.replacement:
            for start in range(0, total, _DRAW_CHUNK):
                size = min(_DRAW_CHUNK, total - start)
                yield from rng.integers(0, n, size=size, dtype=np.int64).tolist()
            return
        for _ in range(total // n):
            yield from rng.permutation(n).tolist()
        if total % n:
            yield from rng.permutation(n)[: total % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(_DrawingSampler):
    """The given indices in a random order."""

    def __init__(self, indices: Sequence[int], generator: _seed.GeneratorLike = None) -> None:
        self.indices = indices
        self.generator = _seed.resolve_generator(generator)

    def __iter__(self) -> Iterator[int]:
        rng = _seed.numpy_rng(self.generator)
        for position in rng.permutation(len(self.indices)).tolist():
            yield self.indices[position]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(_DrawingSampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``."""

    def __init__(
        self,
        weights: Sequence[float],
        num_samples: int,
        replacement: bool = True,
        generator: _seed.GeneratorLike = None,
    ) -> None:
        if not _is_positive_int(num_samples):
            raise ValueError(
                "num_samples should be a positive integer value, but got "
                f"num_samples={num_samples!r}"
            )
        if not isinstance(replacement, bool):
            raise ValueError(
                f"replacement should be a boolean value, but got replacement={replacement!r}"
            )
        weights_array = np.asarray(weights, dtype=np.float64)
        if weights_array.ndim != 1:
            raise ValueError(
                f"weights should be a 1d sequence but given weights have shape "
                f"{tuple(weights_array.shape)}"
            )
        self.weights = weights_array
        self.num_samples = int(num_samples)
        self.replacement = replacement
        self.generator = _seed.resolve_generator(generator)

    def _checked_weights(self) -> np.ndarray:
        w = self.weights
        if w.size == 0 or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise RuntimeError(
                "WeightedRandomSampler: weights must be finite, non-negative and not empty"
            )
        if w.sum() <= 0:
            raise RuntimeError("WeightedRandomSampler: weights sum to zero")
        if not self.replacement and self.num_samples > w.size:
            raise RuntimeError(
                f"WeightedRandomSampler: cannot draw {self.num_samples} samples without "
                f"replacement from {w.size} weights"
            )
        return w

    def __iter__(self) -> Iterator[int]:
        w = self._checked_weights()
        rng = _seed.numpy_rng(self.generator)
        if self.replacement:
            drawn = rng.choice(w.size, size=self.num_samples, replace=True, p=w / w.sum())
        else:
            # Weighted sampling without replacement (Efraimidis-Spirakis): the largest keys
            # w / Exp(1) win. Zero weights come last, once the positive ones are used up, as
            # with torch.multinomial.
            keys = w / rng.standard_exponential(w.size)
            drawn = np.argsort(-keys, kind="stable")[: self.num_samples]
        yield from drawn.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list[int]]):
    """Group the indices of ``sampler`` into lists of ``batch_size``."""

    def __init__(
        self, sampler: Sampler[int] | Iterable[int], batch_size: int, drop_last: bool
    ) -> None:
        if not _is_positive_int(batch_size):
            raise ValueError(
                f"batch_size should be a positive integer value, but got batch_size={batch_size!r}"
            )
        if not isinstance(drop_last, bool):
            raise ValueError(
                f"drop_last should be a boolean value, but got drop_last={drop_last!r}"
            )
        self.sampler = sampler
        self.batch_size = int(batch_size)
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        indices = iter(self.sampler)
        while batch := list(itertools.islice(indices, self.batch_size)):
            if self.drop_last and len(batch) < self.batch_size:
                return
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        if self.drop_last:
            return n // self.batch_size
        return (n + self.batch_size - 1) // self.batch_size

    def state_dict(self) -> dict[str, Any] | None:
        """The wrapped sampler's state, if it has one."""
        state_dict = getattr(self.sampler, "state_dict", None)
        return state_dict() if callable(state_dict) else None

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        restore = getattr(self.sampler, "load_state_dict", None)
        if state is not None and callable(restore):
            restore(state)

    # flowloader.order's contract, through the wrapped sampler (a short last batch counts
    # whole: what lay past the end then must not be there now)

    def read_state(self, state: Any, taken: int) -> dict[str, Any]:
        return read_state(self.sampler, state, taken * self.batch_size)

    def order_changes(self, saved: dict[str, Any], epoch: int) -> list[str]:
        return order_changes(self.sampler, saved, epoch)


class _InfiniteConstantSampler(Sampler[None]):
    """Yields None forever: the placeholder index stream for an IterableDataset, whose samples
    come from the dataset's own iterator (the fetcher stops when that ends)."""

    def __iter__(self) -> Iterator[None]:
        return itertools.repeat(None)
