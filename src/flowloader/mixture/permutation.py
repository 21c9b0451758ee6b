"""Random-access permutations of ``range(n)``: where the j-th sample of a source's epoch comes
from, computed for any j without materialising the permutation (a source may have 10^9
samples, and a mixture many sources), for a whole batch at once.

A four-round Feistel network over the smallest even number of bits covering n is a bijection
of ``range(2**bits)``; values that land past n are sent through it again (cycle walking), so
the result is a bijection of ``range(n)``. The domain is at most 4n, so a value needs fewer
than 4 passes on average. Each element may have its own n and key (a batch mixes sources and
their epochs).
"""

from __future__ import annotations

import hashlib

import numpy as np

ROUNDS = 4
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
# Added to a key to make each round's: multiples of an odd constant, modulo 2**64.
_ROUND_OFFSETS = [np.uint64((r * 0x632BE59BD9B4E019) % (1 << 64)) for r in range(ROUNDS)]
_EPOCH_OFFSET = np.uint64(1 << 40)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser, element-wise on uint64 (products wrap, as intended)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def name_hash(name: str) -> int:
    """A source's 64-bit identity in its permutations' keys: by name, so that adding a
    source does not change the others' orders."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


def epoch_keys(seed: int, names: np.ndarray, epochs: np.ndarray) -> np.ndarray:
    """The permutation key of each (source, epoch): ``names`` their name_hash values (uint64),
    distinct per seed, source and epoch."""
    seeded = _mix(np.array([seed & ((1 << 64) - 1)], dtype=np.uint64))
    return _mix(seeded ^ _mix(names + _GOLDEN) ^ _mix(epochs.astype(np.uint64) + _EPOCH_OFFSET))


def permute(j: np.ndarray, n: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Where each ``j[k]`` (in ``range(n[k])``) goes under the permutation of ``range(n[k])``
    that ``keys[k]`` names."""
    n = n.astype(np.uint64)
    bits = np.ceil(np.log2(np.maximum(n, 2).astype(np.float64))).astype(np.uint64)
    half = (bits + np.uint64(1)) // np.uint64(2)
    mask = (np.uint64(1) << half) - np.uint64(1)
    out = j.astype(np.uint64)
    todo = np.flatnonzero(n > 1)
    while todo.size:
        x, h, m, key = out[todo], half[todo], mask[todo], keys[todo]
        left, right = x >> h, x & m
        for offset in _ROUND_OFFSETS:
            round_key = _mix(key + offset)
            left, right = right, left ^ (_mix(right ^ round_key) & m)
        x = (left << h) | right
        out[todo] = x
        todo = todo[x >= n[todo]]
    out[n <= 1] = 0
    return out.astype(np.int64)
