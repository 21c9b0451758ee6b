"""JSON-safe snapshots of random generators, for checkpoints."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from ._compat import torch as _torch


def generator_state(generator: Any) -> dict[str, Any]:
    """A JSON-safe snapshot of a generator (NumPy's global RNG when ``generator`` is None)."""
    if isinstance(generator, np.random.Generator):
        return {"kind": "numpy", "state": copy.deepcopy(generator.bit_generator.state)}
    if generator is None:
        state = np.random.get_state(legacy=False)
        state["state"] = {"key": state["state"]["key"].tolist(), "pos": int(state["state"]["pos"])}
        return {"kind": "numpy-global", "state": state}
    if _torch.is_generator(generator):
        return {"kind": "torch", "state": generator.get_state().tolist()}
    raise TypeError(f"cannot checkpoint a generator of type {type(generator).__name__}")


def restore_generator(generator: Any, saved: dict[str, Any]) -> None:
    """Put ``generator`` back in the saved state (kinds must agree)."""
    kind = saved["kind"]
    if kind == "numpy" and isinstance(generator, np.random.Generator):
        generator.bit_generator.state = copy.deepcopy(saved["state"])
    elif kind == "numpy-global" and generator is None:
        state = copy.deepcopy(saved["state"])
        state["state"]["key"] = np.asarray(state["state"]["key"], dtype=np.uint32)
        np.random.set_state(state)
    elif kind == "torch" and _torch.is_generator(generator):
        torch = _torch.imported_torch()
        assert torch is not None
        generator.set_state(torch.tensor(saved["state"], dtype=torch.uint8))
    else:
        raise ValueError(
            f"the state was saved with a {kind} generator, but this loader's generator is "
            f"{type(generator).__name__ if generator is not None else 'None (NumPy global RNG)'}"
        )
