"""Random-access permutations of ``range(n)``: where the j-th sample of a source's pass comes
from, computed for any j without materialising the permutation (a source may have 10^9
samples, and a mixture many sources), for a whole batch at once.

On ``range(2**k)``, the smallest power of two covering n, three rounds of "add a key, multiply
by an odd constant, xor with itself shifted right by k/2" (each step a bijection modulo 2**k:
the addition, the odd multiplication, the xorshift) make a keyed bijection; values that land at
n or past it are sent through it again (cycle walking), which makes it a bijection of
``range(n)``. The domain is less than 2n, so a value needs fewer than 2 passes on average. Each
element may have its own n and key: a batch mixes sources and their passes.
"""

from __future__ import annotations

import hashlib

import numpy as np

_MASK64 = (1 << 64) - 1
# One odd multiplier per round (and one to spread the key over the rounds).
_MULTIPLIERS = [np.uint64(m) for m in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB)]
_KEY_SPREAD = [np.uint64(m) for m in (0xD6E8FEB86659FD93, 0xA0761D6478BD642F, 0xE7037ED1A0B428DB)]
_PASS_SPREAD = np.uint64(0xC2B2AE3D27D4EB4F)


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
    """The permutation key of each (source, pass): ``names`` their name_hash values (uint64),
    distinct per seed, source and pass."""
    seeded = np.uint64(_mix(np.array([seed & _MASK64], dtype=np.uint64))[0])
    return _mix(names ^ seeded ^ (epochs.astype(np.uint64) * _PASS_SPREAD))


def permute(j: np.ndarray, n: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Where each ``j[k]`` (in ``range(n[k])``) goes under the permutation of
    ``range(n[k])`` that ``keys[k]`` names."""
    n = n.astype(np.uint64)
    bits = np.ceil(np.log2(np.maximum(n, 2).astype(np.float64))).astype(np.uint64)
    # (float log2 can round a size just past a power of two down onto it: correct by integers)
    bits += (np.uint64(1) << bits) < n
    bits -= (bits > 1) & ((np.uint64(1) << (bits - np.uint64(1))) >= n)
    mask = (np.uint64(1) << bits) - np.uint64(1)
    shift = np.maximum(bits // np.uint64(2), np.uint64(1))
    round_keys = [keys * spread for spread in _KEY_SPREAD]
    out = j.astype(np.uint64)
    todo = np.flatnonzero(n > 1)
    while todo.size:
        x, m, s = out[todo], mask[todo], shift[todo]
        for key, multiplier in zip(round_keys, _MULTIPLIERS, strict=True):
            x = ((x + key[todo]) * multiplier) & m
            x ^= x >> s
        out[todo] = x
        todo = todo[x >= n[todo]]
    out[n <= 1] = 0
    return out.astype(np.int64)
