"""The random draws of a whole batch of samples at once, each sample from its own generator.

A sample's generator in a DataLoader is NumPy's Philox keyed by (epoch seed, index)
(:class:`flowloader.randomness.SampleSeeds`). Building one costs some 7 µs and every scalar
draw a Python call; for small images that is most of a sample's time. :class:`PhiloxDraws`
computes Philox4x64-10 for all the batch's keys with NumPy array operations and then reads
each sample's stream exactly as ``numpy.random.Generator`` reads it: ``random()`` from one
64-bit word, ``integers`` from 32-bit halves (the low half first, the high half kept for the
next 32-bit draw) through Lemire's bounded method with its rejection loop, ``uniform`` as
``low + (high - low) * random()``. The numbers are the generators' own, bit for bit (tested
against ``Generator`` on random keys and draw sequences).

Every draw takes an optional boolean ``mask``: only the samples it selects draw (the others'
streams do not move, and their entries in the result mean nothing), as when a step draws
only for the images it applies to.

:class:`SampleDraws` gives the same interface over any generators, one sample at a time: the
path for generators that are not the loader's (a step built with its own ``rng=``, NumPy's
global RNG, generators handed in by hand).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...permutation import index_kernel

__all__ = ["PhiloxDraws", "SampleDraws"]

_MASK64 = (1 << 64) - 1
_UINT32_MAX = 0xFFFFFFFF
_LOW32 = np.uint64(_UINT32_MAX)
_SHIFT32 = np.uint64(32)
_SHIFT11 = np.uint64(11)
_TO_DOUBLE = 1.0 / 9007199254740992.0  # 2 ** -53, as NumPy's next_double
# Philox4x64's multipliers (for words 0 and 2), split into 32-bit halves, and its key bumps.
_MULTIPLIERS = np.array([[0xD2E7470EE14C6C93], [0xCA5A826395121157]], dtype=np.uint64)
_MULTIPLIER_HALVES = np.array(
    [[0xE14C6C93, 0xD2E7470E], [0x95121157, 0xCA5A8263]], dtype=np.uint64
).reshape(2, 1, 1, 2)
_KEY_BUMPS = np.array([[0x9E3779B97F4A7C15], [0xBB67AE8584CAA73B]], dtype=np.uint64)
_ROUNDS = 10
# What each round adds to the key (wrapping): round r uses key + r * bump.
_KEY_SCHEDULE = np.arange(_ROUNDS, dtype=np.uint64)[:, None, None] * _KEY_BUMPS


def philox_block(key0: Any, key1: np.ndarray, counter: int) -> np.ndarray:
    """Philox4x64-10 of the counter (``counter``, 0, 0, 0) under the keys (``key0``,
    ``key1[k]``): an (N, 4) uint64 array, the words NumPy's ``Philox(key=[key0, key1[k]])``
    gives from position ``4 * (counter - 1)`` on (it steps the counter before each block).
    Native where the index kernel is built (a few microseconds for a batch, against some
    250 for the NumPy code; ``FLOWLOADER_NATIVE=0`` turns it off)."""
    philox_into = getattr(index_kernel(), "philox_into", None)  # None in an older build
    if philox_into is not None:
        out = np.empty((len(key1), 4), np.uint64)
        philox_into(int(key0) & _MASK64, np.ascontiguousarray(key1, np.uint64), counter, out)
        return out
    return numpy_philox_block(key0, key1, counter)


def numpy_philox_block(key0: Any, key1: np.ndarray, counter: int) -> np.ndarray:
    """:func:`philox_block` in NumPy: every array is made once and written in place, so for
    a batch the cost is the number of NumPy calls, not their size."""
    count = len(key1)
    keys = np.empty((_ROUNDS, 2, count), np.uint64)
    keys[:, 0], keys[:, 1] = key0, key1
    keys += _KEY_SCHEDULE
    # Words 0 and 2 (multiplied each round), and words 1 and 3.
    multiplied = np.zeros((2, count), np.uint64)
    multiplied[0] = counter
    # Words 1 and 3 are the last round's low words, reversed: two buffers taking turns.
    lows = np.zeros((2, 2, count), np.uint64)
    other = lows[1]
    # The high word of each 64x64-bit product from four 32x32-bit ones, reading the 32-bit
    # halves of words through uint32 views (little-endian); the low word by a wrapping multiply.
    halves = multiplied.view(np.uint32).reshape(2, count, 2, 1)
    parts = np.empty((2, count, 2, 2), np.uint64)  # [..., i, j]: half i of x * half j of M
    words = parts.view(np.uint32).reshape(2, count, 2, 2, 2)
    # high(x * M) = x1 m1 + (x1 m0 >> 32) + (x0 m1 >> 32) + carry, the carry the top of
    # (x0 m0 >> 32) + low32(x1 m0) + low32(x0 m1): views made once, the buffers reused.
    carry_terms = words[..., 0, 0, 1], words[..., 1, 0, 0], words[..., 0, 1, 0]
    high_terms = parts[..., 1, 1], words[..., 1, 0, 1], words[..., 0, 1, 1]
    high, mixed = np.empty((2, count), np.uint64), np.empty((2, count), np.uint64)
    flipped_high = high[::-1]
    flipped_lows = lows[0][::-1], lows[1][::-1]
    for number, round_keys in enumerate(keys):
        np.multiply(halves, _MULTIPLIER_HALVES, out=parts)
        np.add(carry_terms[0], carry_terms[1], out=high, dtype=np.uint64)
        high += carry_terms[2]
        high >>= _SHIFT32
        for term in high_terms:
            high += term
        np.multiply(multiplied, _MULTIPLIERS, out=lows[number % 2])
        np.bitwise_xor(flipped_high, other, out=mixed)
        np.bitwise_xor(mixed, round_keys, out=multiplied)
        other = flipped_lows[number % 2]
    return np.stack([multiplied[0], other[0], multiplied[1], other[1]], axis=1)


class PhiloxDraws:
    """The draws of the generators ``Philox(key=[epoch_seed, index])`` of ``indices``, each
    from its first number on, computed for all of them at once (see the module docstring)."""

    def __init__(self, epoch_seed: int, indices: Sequence[int]) -> None:
        self.count = len(indices)
        self._key0 = int(epoch_seed) & _MASK64
        self._key1 = np.array([int(i) & _MASK64 for i in indices], np.uint64)
        self._words = np.empty((self.count, 0), np.uint64)
        self._all = np.arange(self.count)
        # Each sample's next word, and the high half a 32-bit draw left for the next one;
        # while every sample has drawn the same, one number stands for all of them.
        self._position: int | np.ndarray = 0
        self._has_half: bool | np.ndarray = False
        self._half = np.zeros(self.count, np.uint64)

    def _ensure(self, words: int) -> None:
        while self._words.shape[1] < words:
            block = philox_block(self._key0, self._key1, self._words.shape[1] // 4 + 1)
            self._words = np.concatenate([self._words, block], axis=1)

    def _uint64(self, mask: np.ndarray | None) -> np.ndarray:
        if mask is None and isinstance(self._position, int):
            self._ensure(self._position + 1)
            out = self._words[:, self._position]
            self._position += 1
            return out
        if isinstance(self._position, int):
            self._position = np.full(self.count, self._position, np.int64)
        chosen = self._all if mask is None else np.flatnonzero(mask)
        out = np.zeros(self.count, np.uint64)
        if len(chosen):
            at = self._position[chosen]
            self._ensure(int(at.max()) + 1)
            out[chosen] = self._words[chosen, at]
            self._position[chosen] += 1
        return out

    def _uint32(self, mask: np.ndarray | None) -> np.ndarray:
        """NumPy's next_uint32 for Philox: the kept high half if there is one, else the low
        half of a new word (its high half kept)."""
        if mask is None and isinstance(self._has_half, bool):
            if self._has_half:
                self._has_half = False
                return self._half.copy()
            word = self._uint64(None)
            self._half = word >> _SHIFT32
            self._has_half = True
            return word & _LOW32
        if isinstance(self._has_half, bool):
            self._has_half = np.full(self.count, self._has_half)
        chosen = np.ones(self.count, bool) if mask is None else np.asarray(mask, bool)
        kept = chosen & self._has_half
        fresh = chosen & ~self._has_half
        out = np.where(kept, self._half, np.uint64(0))
        self._has_half[kept] = False
        if fresh.any():
            word = self._uint64(fresh)
            out[fresh] = word[fresh] & _LOW32
            self._half[fresh] = word[fresh] >> _SHIFT32
            self._has_half[fresh] = True
        return out

    def random(self, mask: np.ndarray | None = None) -> np.ndarray:
        """``Generator.random()`` for each sample: float64 in [0, 1)."""
        return (self._uint64(mask) >> _SHIFT11).astype(np.float64) * _TO_DOUBLE

    def uniform(self, low: float, high: float, mask: np.ndarray | None = None) -> np.ndarray:
        """``Generator.uniform(low, high)`` for each sample."""
        return float(low) + (float(high) - float(low)) * self.random(mask)

    def integers(self, low: int, high: Any, mask: np.ndarray | None = None) -> np.ndarray:
        """``Generator.integers(low, high)`` (int64, ``high`` excluded) for each sample;
        ``high`` one number, or one per sample."""
        if np.ndim(high):
            return self._integers_each(int(low), np.asarray(high, np.int64), mask)
        span = int(high) - 1 - int(low)
        if span < 0:
            raise ValueError(f"low >= high: integers({low}, {high})")
        if span == 0:  # NumPy draws nothing for a range of one value
            return np.full(self.count, int(low), np.int64)
        if span > _UINT32_MAX:
            raise ValueError(f"integers({low}, {high}): ranges over 2**32 are not batched")
        if span == _UINT32_MAX:
            return int(low) + self._uint32(mask).astype(np.int64)
        return int(low) + self._lemire(np.uint64(span + 1), mask)

    def permutation(self, n: int) -> np.ndarray:
        """``Generator.permutation(n)`` for each sample, (N, n): NumPy's Fisher-Yates from
        the end, each swap's index by masked rejection (``random_interval``) on 32-bit
        draws."""
        if n > _UINT32_MAX:
            raise ValueError(f"permutation({n}): not batched")
        order = np.tile(np.arange(n, dtype=np.int64), (self.count, 1))
        rows = np.arange(self.count)
        for i in range(n - 1, 0, -1):
            mask = np.uint64((1 << i.bit_length()) - 1)  # the smallest all-ones mask >= i
            drawn = self._uint32(None) & mask
            again = drawn > i
            while again.any():
                drawn[again] = (self._uint32(again) & mask)[again]
                again = drawn > i
            j = drawn.astype(np.int64)
            order[rows, i], order[rows, j] = order[rows, j], order[rows, i].copy()
        return order

    def _integers_each(self, low: int, high: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        """integers(low, high[k]) for each selected sample k."""
        span = high - 1 - low
        chosen = np.ones(self.count, bool) if mask is None else np.asarray(mask, bool).copy()
        if np.any(span[chosen] < 0):
            raise ValueError(f"low >= high: integers({low}, {high[chosen & (span < 0)][0]})")
        if np.any(span[chosen] >= _UINT32_MAX):
            raise ValueError(f"integers({low}, ...): ranges of 2**32 and over are not batched")
        chosen &= span > 0  # a range of one value draws nothing
        drawn = self._lemire(np.maximum(span + 1, 1).astype(np.uint64), chosen)
        return low + np.where(chosen, drawn, 0)

    def _lemire(self, size: Any, mask: np.ndarray | None) -> np.ndarray:
        """NumPy's buffered_bounded_lemire_uint32 for ranges of ``size`` values (one, or one
        per sample), with its rejection loop: each rejected sample draws again."""
        product = self._uint32(mask) * size
        threshold = (np.uint64(_UINT32_MAX) - (size - np.uint64(1))) % size
        again = (product & _LOW32) < threshold
        if mask is not None:
            again &= mask
        while again.any():  # rare: under (size - 1) / 2**32 a draw
            redrawn = self._uint32(again) * size
            product[again] = redrawn[again]
            again &= (product & _LOW32) < threshold
        return (product >> _SHIFT32).astype(np.int64)


class SampleDraws:
    """The interface of :class:`PhiloxDraws` over one sample's generator (any object with
    NumPy's ``random``, ``integers`` and ``uniform``), drawn by scalar calls: arrays of
    length one."""

    def __init__(self, generator: Any) -> None:
        self.generator = generator

    def _on(self, mask: np.ndarray | None) -> bool:
        return mask is None or bool(mask[0])

    def random(self, mask: np.ndarray | None = None) -> np.ndarray:
        """``random()`` if the sample is selected."""
        return np.array([self.generator.random() if self._on(mask) else 0.0])

    def uniform(self, low: float, high: float, mask: np.ndarray | None = None) -> np.ndarray:
        """``uniform(low, high)`` if the sample is selected."""
        return np.array([self.generator.uniform(low, high) if self._on(mask) else 0.0])

    def permutation(self, n: int) -> np.ndarray:
        """``permutation(n)``, as an array of one row."""
        return np.asarray(self.generator.permutation(n))[None]

    def integers(self, low: int, high: Any, mask: np.ndarray | None = None) -> np.ndarray:
        """``integers(low, high)`` if the sample is selected (``high``: a number or an
        array of one)."""
        if not self._on(mask):
            return np.zeros(1, np.int64)
        bound = int(np.asarray(high).reshape(-1)[0])
        return np.array([self.generator.integers(low, bound)], np.int64)
