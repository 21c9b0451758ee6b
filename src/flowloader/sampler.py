"""Samplers with PyTorch's semantics: which dataset indices to load, and in what order."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any, Generic, TypeVar

import numpy as np

from . import _seed
from .order import describe, digest, order_changes, read_state

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


class _Chunked(Sampler[int]):
    """A sampler whose order comes as lists of indices (each made when the order reaches it,
    so that its draws happen where one index at a time would make them): one index at a
    time for ``iter()``, whole slices for :class:`BatchSampler` (a batch is then one slice,
    not 64 steps of a generator)."""

    def _chunks(self) -> Iterator[list[int]]:
        raise NotImplementedError

    def __iter__(self) -> Iterator[int]:
        for chunk in self._chunks():
            yield from chunk


class _DrawingSampler(_Chunked):
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

    def _chunks(self) -> Iterator[list[int]]:
        """The same order as lists (for BatchSampler)."""
        n = len(self.data_source)
        for start in range(0, n, _DRAW_CHUNK):
            yield list(range(start, min(start + _DRAW_CHUNK, n)))

    def __len__(self) -> int:
        return len(self.data_source)

    def read_state(self, state: Any, taken: int) -> dict[str, Any]:
        """The first ``taken`` positions (flowloader.order's contract)."""
        return {"prefix": taken}

    def order_settings(self) -> dict[str, Any]:
        """flowloader.order's contract: positions in order, nothing to set."""
        return {"order": "sequential"}


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

    def _chunks(self) -> Iterator[list[int]]:
        n = len(self.data_source)
        if n == 0:
            raise ValueError("RandomSampler cannot draw indices from an empty dataset")
        rng = _seed.numpy_rng(self.generator)
        total = int(self.num_samples)
        if self.replacement:
            for start in range(0, total, _DRAW_CHUNK):
                size = min(_DRAW_CHUNK, total - start)
                yield rng.integers(0, n, size=size, dtype=np.int64).tolist()
            return
        for _ in range(total // n):
            yield rng.permutation(n).tolist()
        if total % n:
            yield rng.permutation(n)[: total % n].tolist()

    def __len__(self) -> int:
        return self.num_samples

    def order_settings(self) -> dict[str, Any]:
        """flowloader.order's contract (the generator's state is the checkpoint's)."""
        return {
            "order": "random",
            "replacement": self.replacement,
            "num_samples": self._num_samples,
        }


class SubsetRandomSampler(_DrawingSampler):
    """The given indices in a random order."""

    def __init__(self, indices: Sequence[int], generator: _seed.GeneratorLike = None) -> None:
        self.indices = indices
        self.generator = _seed.resolve_generator(generator)

    def _chunks(self) -> Iterator[list[int]]:
        rng = _seed.numpy_rng(self.generator)
        indices = self.indices
        yield [indices[position] for position in rng.permutation(len(indices)).tolist()]

    def __len__(self) -> int:
        return len(self.indices)

    def order_settings(self) -> dict[str, Any]:
        """flowloader.order's contract: the indices, by digest."""
        return {"order": "random subset", "indices": digest(self.indices)}


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

    def _chunks(self) -> Iterator[list[int]]:
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
        yield drawn.tolist()

    def __len__(self) -> int:
        return self.num_samples

    def order_settings(self) -> dict[str, Any]:
        """flowloader.order's contract: the weights (by digest) and the draws."""
        return {
            "order": "weighted random",
            "weights": digest(self.weights),
            "num_samples": self.num_samples,
            "replacement": self.replacement,
        }


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
        chunks = _chunks_of(self.sampler)
        if chunks is not None:  # one of ours: each batch a slice of its lists
            yield from _sliced(chunks, self.batch_size, self.drop_last)
            return
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

    def order_settings(self) -> dict[str, Any]:
        """The batch size and the wrapped sampler's settings (``drop_last`` only cuts the
        end). The loader's own BatchSampler is left to the loader, which regroups what is
        left of an epoch into a new batch size."""
        return {"batch_size": self.batch_size, "sampler": describe(self.sampler)}


# The samplers whose iter() is their _chunks() one index at a time (not a subclass's own
# __iter__): their batches may be cut from the chunks.
_CHUNKED_ITERS = frozenset({_Chunked.__iter__, SequentialSampler.__iter__})


def _chunks_of(sampler: Any) -> Iterator[list[int]] | None:
    """``sampler``'s order as lists, where it is one of these samplers as they are; else None."""
    if getattr(type(sampler), "__iter__", None) in _CHUNKED_ITERS:
        return sampler._chunks()
    return None


def _sliced(chunks: Iterator[list[int]], size: int, drop_last: bool) -> Iterator[list[int]]:
    """BatchSampler's grouping of the indices in ``chunks``: lists of ``size``, the short
    last one kept unless ``drop_last``. A chunk is taken when a batch first needs one of its
    indices, as the grouping of one index at a time takes it."""
    batch: list[int] = []
    for chunk in chunks:
        start = 0
        if batch:  # finish the batch the last chunk began
            start = size - len(batch)
            batch += chunk[:start]
            if len(batch) < size:
                continue
            yield batch
        full = start + (len(chunk) - start) // size * size
        for begin in range(start, full, size):
            yield chunk[begin : begin + size]
        batch = chunk[full:]
    if batch and not drop_last:
        yield batch


class _InfiniteConstantSampler(Sampler[None]):
    """Yields None forever: the placeholder index stream for an IterableDataset, whose samples
    come from the dataset's own iterator (the fetcher stops when that ends)."""

    def __iter__(self) -> Iterator[None]:
        return itertools.repeat(None)
