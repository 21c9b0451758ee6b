"""A keyed permutation of ``range(n)`` for any n, computed position by position.

``permute(j, n, keys)`` says where the j-th element of a pass goes, for a whole batch of
(j, n, key) triples at once, without materialising the permutation: a source of 10^9 samples,
or a mixture of many sources, costs the same per position as a small one. Used wherever an
order is index arithmetic (a Mixture's sources, Packed's documents).

Above ``SMALL`` elements: ``range(2**k)``, k the bit length of ``n - 1``, is split into a high
and a low part, and each of ``ROUNDS`` unbalanced Feistel rounds replaces ``(high, low)`` by
``(low, high ^ F(low))``; the parts trade widths every round, and each round is a bijection
whatever F is. F is SplitMix64's finaliser of the low part xored with a 64-bit round key
(derived from the whole key), so every bit of the key reaches every output. Values that land
at n or past it go through the network again (cycle walking), which makes it a bijection of
``range(n)``; since ``2**k < 2n``, fewer than 2 passes on average. This is the construction
of ``tf.random.experimental.index_shuffle`` and Grain's index shuffle. Up to ``SMALL``
elements, where a few-bit Feistel network is measurably far from uniform, element j goes to
its rank among the keyed hashes of ``range(n)``: a uniform order at O(n) per element.

The native kernel (``_native/permute.c``, built with the package) computes the same values
as the NumPy code below; tests/unit/test_permutation.py checks both, and that passes are
distinct, the first element uniform, and position and value uncorrelated.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from typing import Any

import numpy as np

_kernel: Any
try:
    _kernel = importlib.import_module(f"{__package__}._index_kernel")
except ImportError:  # not built (no compiler): the NumPy path gives the same values
    _kernel = None

__all__ = ["ROUNDS", "SMALL", "name_hash", "pass_keys", "permute"]

ROUNDS = 6
SMALL = 32
_MASK64 = (1 << 64) - 1
_U64 = np.uint64
_ROUND_CONSTANTS = [
    _U64(c)
    for c in (
        0xD6E8FEB86659FD93,
        0xA0761D6478BD642F,
        0xE7037ED1A0B428DB,
        0x8EBC6AF09C88C6E3,
        0x589965CC75374CC3,
        0x1D8E4E27C47D124F,
    )
]
_PASS_STEP = _U64(0xC2B2AE3D27D4EB4F)


def native_available() -> bool:
    """Whether the native kernel computes permutations here (FLOWLOADER_NATIVE=0 turns it
    off, with the JPEG kernel)."""
    return index_kernel() is not None


def index_kernel() -> Any:
    """The native index kernel (``_native/``: the keyed permutation, Philox blocks) where it
    runs here, else None: not built, or switched off by FLOWLOADER_NATIVE=0."""
    if os.environ.get("FLOWLOADER_NATIVE", "1") == "0":
        return None
    return _kernel


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser, element-wise on uint64 (a bijection; products wrap)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def name_hash(name: str) -> int:
    """A stream's 64-bit identity in its keys (a source by its name, so that adding a source
    leaves the others' orders alone)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


def pass_keys(seed: int, streams: np.ndarray, passes: np.ndarray) -> np.ndarray:
    """The 64-bit key of each (stream, pass): ``streams`` are name_hash values (uint64),
    ``passes`` the pass numbers. Distinct seeds, streams and passes give unrelated keys."""
    seeded = _mix(np.array([seed & _MASK64], dtype=np.uint64))[0]
    stream_keys = _mix(np.asarray(streams).astype(np.uint64) ^ seeded)
    with np.errstate(over="ignore"):
        return _mix(stream_keys + np.asarray(passes).astype(np.uint64) * _PASS_STEP)


def _bits(n: np.ndarray) -> np.ndarray:
    """The bit length of ``n - 1`` (at least 2), exactly, for uint64 ``n >= 1``."""
    value = n - _U64(1)
    length = np.zeros(n.shape, dtype=np.uint64)
    for width in (32, 16, 8, 4, 2, 1):  # a binary search for the highest set bit
        wide = (value >> _U64(width)) > _U64(0)
        length[wide] += _U64(width)
        value[wide] >>= _U64(width)
    return np.maximum(length + value, _U64(2))


def permute(j: np.ndarray, n: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Where each ``j[k]`` (in ``range(n[k])``) goes under the permutation of ``range(n[k])``
    that ``keys[k]`` names; int64."""
    j = np.ascontiguousarray(j, dtype=np.int64)
    n = np.ascontiguousarray(np.broadcast_to(n, j.shape), dtype=np.int64)
    keys = np.ascontiguousarray(np.broadcast_to(keys, j.shape)).astype(np.uint64, copy=False)
    out = np.empty(j.shape, dtype=np.int64)
    if native_available():
        _kernel.permute_into(j, n, keys, out)
        return out
    out[:] = j
    round_keys = np.stack([_mix(keys ^ constant) for constant in _ROUND_CONSTANTS])
    small = np.flatnonzero((n > 1) & (n <= SMALL))
    if small.size:
        out[small] = _ranked(j[small], n[small], round_keys[0, small])
    large = np.flatnonzero(n > SMALL)
    if large.size:
        out[large] = _feistel(j[large], n[large].astype(np.uint64), round_keys[:, large])
    out[n <= 1] = 0
    return out


def _ranked(j: np.ndarray, n: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Each j's rank among the keyed hashes of ``range(n)`` (ties broken by index)."""
    candidates = np.arange(SMALL, dtype=np.uint64)
    hashes = _mix(key[:, None] ^ candidates[None, :])
    mine = _mix(key ^ j.astype(np.uint64))
    below = (hashes < mine[:, None]) | ((hashes == mine[:, None]) & (candidates < j[:, None]))
    return (below & (candidates[None, :] < n[:, None].astype(np.uint64))).sum(axis=1)


def _feistel(j: np.ndarray, n: np.ndarray, round_keys: np.ndarray) -> np.ndarray:
    out = j.astype(np.uint64)
    bits = _bits(n)
    high = bits - bits // _U64(2)  # the high part's width in the first round
    todo = np.arange(len(out))
    while todo.size:
        x = out[todo]
        width_high, width_low = high[todo], bits[todo] - high[todo]
        keys = round_keys[:, todo]
        for r in range(ROUNDS):
            hi = x >> width_low
            lo = x & ((_U64(1) << width_low) - _U64(1))
            f = _mix(lo ^ keys[r]) >> (_U64(64) - width_high)
            x = (lo << width_high) | (hi ^ f)
            width_high, width_low = width_low, width_high
        out[todo] = x
        todo = todo[x >= n[todo]]
    return out.astype(np.int64)
