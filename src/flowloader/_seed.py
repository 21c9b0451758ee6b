"""Randomness sources: turn the user's ``generator`` argument into NumPy generators and seeds,
and snapshot a generator's state for checkpoints (JSON-safe).

``generator`` may be an ``int`` seed, a ``numpy.random.Generator``, a ``torch.Generator`` (for
code ported from PyTorch) or ``None``. ``None`` draws from NumPy's global RNG, the way PyTorch
draws from its global RNG, so ``np.random.seed`` makes an unseeded pipeline reproducible.
"""

from __future__ import annotations

import base64
import copy
import random
from typing import Any

import numpy as np

from ._compat import torch as _torch
from ._compat import torch_generator_state

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


def generator_state(generator: Any) -> dict[str, Any]:
    """A JSON-safe snapshot of a generator (NumPy's global RNG when ``generator`` is None)."""
    if isinstance(generator, np.random.Generator):
        return {"kind": "numpy", "state": copy.deepcopy(generator.bit_generator.state)}
    if generator is None:
        state = np.random.get_state(legacy=False)
        key = _text_of(state["state"]["key"].astype("<u4"))
        state["state"] = {"key": key, "pos": int(state["state"]["pos"])}
        return {"kind": "numpy-global", "state": state}
    if _torch.is_generator(generator):
        return {
            "kind": "torch",
            "state": torch_generator_state.encode(generator.get_state().numpy()),
        }
    raise TypeError(f"cannot checkpoint a generator of type {type(generator).__name__}")


def _text_of(values: np.ndarray) -> str:
    """A generator's state words as base64 text: a third of the JSON list of their numbers
    (MT19937's 624 words are 3.3 KB, not 7.3 KB). A torch.Generator's has forms of its own
    (``_compat.torch_generator_state``)."""
    return base64.b64encode(values.tobytes()).decode("ascii")


def _array_of(saved: str | list[int], dtype: Any) -> np.ndarray:
    """The words :func:`_text_of` wrote, or the list of numbers states saved before it."""
    if isinstance(saved, str):
        return np.frombuffer(base64.b64decode(saved), dtype=dtype)
    return np.asarray(saved, dtype=dtype)


def generator_kind(generator: Any) -> str:
    """The kind :func:`generator_state` records for ``generator``."""
    if isinstance(generator, np.random.Generator):
        return "numpy"
    if generator is None:
        return "numpy-global"
    return "torch" if _torch.is_generator(generator) else type(generator).__name__


def restore_generator(generator: Any, saved: dict[str, Any]) -> None:
    """Put ``generator`` back in the saved state (kinds must agree)."""
    kind = saved["kind"]
    if kind == "numpy" and isinstance(generator, np.random.Generator):
        generator.bit_generator.state = copy.deepcopy(saved["state"])
    elif kind == "numpy-global" and generator is None:
        state = copy.deepcopy(saved["state"])
        state["state"]["key"] = _array_of(state["state"]["key"], "<u4").astype(np.uint32)
        np.random.set_state(state)
    elif kind == "torch" and _torch.is_generator(generator):
        torch = _torch.imported_torch()
        assert torch is not None
        generator.set_state(torch.from_numpy(torch_generator_state.decode(saved["state"])))
    else:
        raise ValueError(
            f"the state was saved with a {kind} generator, but this loader's generator is "
            f"{type(generator).__name__ if generator is not None else 'None (NumPy global RNG)'}"
        )
