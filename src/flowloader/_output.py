"""The last step of the pipeline: batches as NumPy arrays (default), torch tensors or JAX arrays."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from ._compat import jax as _jax
from ._compat import torch as _torch
from ._ipc import tree
from ._warn import warn_at_user

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
        warn_at_user(
            "pin_memory=True has no effect: page-locked memory needs output='torch' and an "
            "accelerator (CUDA); "
            + ("none is available." if output == "torch" else f"batches are {output} arrays.")
        )
        return False
    return pin_memory


# Collate functions that are a NumPy collate followed by an output's conversion (the PyTorch
# drop-in's default_collate is flowloader's, then torch.from_numpy on every array). Where the
# loader's last step makes that output anyway, the loader runs the NumPy form: inside a worker
# it stacks straight into shared memory, and the arrays become tensors once, at the consumer.
_NUMPY_FORMS: dict[tuple[Callable[[Any], Any], str], Callable[[Any], Any]] = {}


def register_numpy_form(
    collate_fn: Callable[[Any], Any], output: str, numpy_form: Callable[[Any], Any]
) -> None:
    """Declare that ``collate_fn(batch)`` is ``numpy_form(batch)`` converted to ``output``."""
    _NUMPY_FORMS[(collate_fn, output)] = numpy_form


def collate_to_run(collate_fn: Callable[[Any], Any], output: str) -> Callable[[Any], Any]:
    """What the loader calls in place of ``collate_fn`` when batches leave as ``output``."""
    return _NUMPY_FORMS.get((collate_fn, output), collate_fn)


def converter(output: str, pinned: bool) -> Callable[[Any], Any] | None:
    """A function turning a NumPy batch into the requested output, or None for NumPy."""
    if output == "numpy":
        return None
    if output == "jax":
        return lambda batch: map_arrays(batch, _jax.to_array)
    if pinned:  # the dataset's own tensors are pinned too, as PyTorch pins every tensor
        return lambda batch: map_arrays(batch, _pinned_tensor, tensors=True)
    return lambda batch: map_arrays(batch, _torch.to_tensor)


def _pinned_tensor(leaf: Any) -> Any:
    return _torch.pin(leaf if _torch.is_tensor(leaf) else _torch.to_tensor(leaf))


def map_arrays(batch: Any, fn: Callable[[Any], Any], *, tensors: bool = False) -> Any:
    """``batch`` with ``fn`` applied to each array leaf (tensors too, with ``tensors``); a
    batch without any is returned as it is."""
    structure, arrays = tree.split(batch, tensors=tensors)
    if not arrays:
        return batch
    return tree.join(structure, [fn(array) for array in arrays])
