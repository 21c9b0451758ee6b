"""A CPU ``torch.Generator``'s state for checkpoints, in few bytes.

torch's CPU state is 5,056 bytes: a 24-byte header (the seed, then MT19937's ``left`` and
``seeded`` counters and its ``next`` index), the 624 state words of 32 bits each stored in 8
bytes, and a 40-byte tail (cached normal samples). Base64 makes that 6.7 KB, more than a whole
flowloader state should be. So a state is saved as one of:

- ``{"seed": s, "words": n}``: a generator seeded with ``manual_seed(s)`` that has drawn ``n``
  32-bit words since (the drop-in loader's own generator), up to a few thousand words;
- ``{"packed": text}``: the header, the words' four low bytes and the tail, 2,560 bytes as
  base64 text (3.4 KB; base85 would be 3.2 KB, but Python's encoder takes 160 us, base64's 7);
- the whole state as base64 text (a state of another size: a CUDA generator's, or one saved
  before these forms).

Each short form is checked to give back the very bytes it stands for before it is used.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

from .torch import require_torch

_HEADER = 24
_WORDS = 624
_TAIL = 40
_SIZE = _HEADER + 8 * _WORDS + _TAIL
# How many MT19937 twists (624 words each) a seeded generator may have gone through and still
# be saved as its seed: the drop-in's own generator draws a few words an epoch.
_MAX_TWISTS = 8


def encode(state: np.ndarray) -> Any:
    """The JSON-safe form of ``state``, a ``torch.Generator.get_state()`` as NumPy bytes."""
    state = np.ascontiguousarray(state, dtype=np.uint8)
    if state.size == _SIZE:
        seeded = _as_seed_and_words(state)
        if seeded is not None:
            return seeded
        packed = _packed(state)
        if np.array_equal(_unpacked(packed), state):
            return {"packed": base64.b64encode(packed).decode("ascii")}
    return base64.b64encode(state.tobytes()).decode("ascii")


def decode(saved: Any) -> np.ndarray:
    """The state bytes :func:`encode` stood for (or a list of numbers, as saved long ago)."""
    if isinstance(saved, dict) and "seed" in saved:
        generator = require_torch().Generator().manual_seed(int(saved["seed"]))
        _draw_words(generator, int(saved["words"]))
        return generator.get_state().numpy()
    if isinstance(saved, dict):
        return _unpacked(base64.b64decode(saved["packed"]))
    if isinstance(saved, str):
        return np.frombuffer(base64.b64decode(saved), dtype=np.uint8).copy()
    return np.asarray(saved, dtype=np.uint8)


def _as_seed_and_words(state: np.ndarray) -> dict[str, int] | None:
    """``{"seed", "words"}`` if ``state`` is its own seed's after that many words, else None.

    After ``n >= 1`` words, ``next`` is ``(n - 1) % 624 + 1``: only one count per twist can
    match, so at most ``_MAX_TWISTS`` counts are tried, each by drawing on from the last."""
    seed = int(state[:8].view("<u8")[0])
    torch = require_torch()
    generator = torch.Generator().manual_seed(seed)
    if np.array_equal(generator.get_state().numpy(), state):
        return {"seed": seed, "words": 0}
    next_index = int(state[16:24].view("<u8")[0])
    if not 1 <= next_index <= _WORDS:
        return None
    drawn = 0
    for twist in range(_MAX_TWISTS):
        words = twist * _WORDS + next_index
        _draw_words(generator, words - drawn)
        drawn = words
        if np.array_equal(generator.get_state().numpy(), state):
            return {"seed": seed, "words": words}
    return None


def _draw_words(generator: Any, words: int) -> None:
    """Advance ``generator`` by ``words`` 32-bit words (an int64 draw takes two, int32 one)."""
    torch = require_torch()
    if words // 2:
        torch.empty(words // 2, dtype=torch.int64).random_(generator=generator)
    if words % 2:
        torch.empty(1, dtype=torch.int32).random_(generator=generator)


def _packed(state: np.ndarray) -> bytes:
    words = state[_HEADER : _HEADER + 8 * _WORDS].view("<u8").astype("<u4")
    return state[:_HEADER].tobytes() + words.tobytes() + state[-_TAIL:].tobytes()


def _unpacked(packed: bytes) -> np.ndarray:
    data = np.frombuffer(packed, dtype=np.uint8)
    words = data[_HEADER : _HEADER + 4 * _WORDS].view("<u4").astype("<u8")
    return np.concatenate([data[:_HEADER], words.view(np.uint8), data[-_TAIL:]])
