"""The last step of the pipeline: batches as NumPy arrays (default), torch tensors or JAX arrays."""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Callable
from typing import Any

from ._compat import jax as _jax
from ._compat import torch as _torch
from ._ipc import tree

OUTPUTS = ("numpy", "torch", "jax")


def check_output(output: str) -> None:
    """Refuse an unknown output, or one whose framework is not installed, at construction."""
    if output not in OUTPUTS:
        raise ValueError(f"output should be one of {', '.join(OUTPUTS)}, but got output={output!r}")
    if output != "numpy" and importlib.util.find_spec(output) is None:
        raise ImportError(f"output={output!r} needs {output} installed (pip install {output})")


def pins(output: str, pin_memory: bool) -> bool:
    """Whether batches will be pinned: warns when ``pin_memory=True`` cannot take effect."""
    # Asking for torch output and pinning makes importing torch the user's choice.
    if pin_memory and not (output == "torch" and _torch.accelerator_available(import_torch=True)):
        warnings.warn(
            "pin_memory=True has no effect: page-locked memory needs output='torch' and an "
            "accelerator (CUDA); "
            + ("none is available." if output == "torch" else f"batches are {output} arrays."),
            stacklevel=6,
        )
        return False
    return pin_memory


# Collate functions whose batches already are an output's arrays (the PyTorch drop-in's tensor
# default_collate, for "torch"): the output step would only walk the batch again.
_FINAL: dict[str, list[Callable[[Any], Any]]] = {"torch": [], "jax": []}


def register_final_collate(output: str, collate_fn: Callable[[Any], Any]) -> None:
    """Declare that ``collate_fn``'s batches need no conversion for ``output``."""
    _FINAL[output].append(collate_fn)


def converter(
    output: str, pinned: bool, collate_fn: Callable[[Any], Any] | None = None
) -> Callable[[Any], Any] | None:
    """A function turning a NumPy batch into the requested output, or None where there is
    nothing to do (NumPy output, or a collate_fn whose batches are already the output's)."""
    if output == "numpy":
        return None
    if not pinned and any(collate_fn is final for final in _FINAL[output]):
        return None
    if output == "jax":
        return lambda batch: _map_arrays(batch, _jax.to_array)
    if pinned:  # the dataset's own tensors are pinned too, as PyTorch pins every tensor
        return lambda batch: _map_arrays(batch, _pinned_tensor, tensors=True)
    return lambda batch: _map_arrays(batch, _torch.to_tensor)


def _pinned_tensor(leaf: Any) -> Any:
    return _torch.pin(leaf if _torch.is_tensor(leaf) else _torch.to_tensor(leaf))


def _map_arrays(batch: Any, fn: Callable[[Any], Any], *, tensors: bool = False) -> Any:
    structure, arrays = tree.split(batch, tensors=tensors)
    return tree.join(structure, [fn(array) for array in arrays])
