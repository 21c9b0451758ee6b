"""The drop-in's ``default_collate`` and ``default_convert``: torch's rules, handing out tensors.

They run flowloader's NumPy rules (the same structure, dtypes and errors) and turn every
numeric array into a tensor sharing its memory. Inside a worker the loader calls the allocating
form, which stacks straight into the batch's shared memory, so the tensors travel without a
copy. Imported only where torch is installed.
"""

from __future__ import annotations

from typing import Any

import torch

from flowloader import collate as _collate
from flowloader._compat import torch as _torch
from flowloader._fetch import register_allocating_collate
from flowloader._ipc import tree
from flowloader._output import register_final_collate
from flowloader.batching import Allocate

__all__ = ["default_collate", "default_convert"]

_NESTED = (
    "Batches of nested tensors are not currently supported by the default collate_fn; please "
    "provide a custom collate_fn to handle them appropriately."
)


def to_tensors(batch: Any) -> Any:
    """``batch`` with its numeric NumPy arrays as tensors sharing their memory."""
    structure, arrays = tree.split(batch)
    if not arrays:
        return batch
    return tree.join(structure, [_torch.to_tensor(array) for array in arrays])


def _refuse_nested(batch: Any) -> None:
    first = batch[0] if isinstance(batch, list) and batch else None
    if isinstance(first, torch.Tensor) and first.is_nested:
        raise RuntimeError(_NESTED)


def default_collate(batch: list[Any]) -> Any:
    """Stack a list of samples into a batch of torch tensors, keeping the sample's structure
    (``torch.utils.data.default_collate``'s rules)."""
    _refuse_nested(batch)
    return to_tensors(_collate.default_collate(batch))


def default_convert(data: Any) -> Any:
    """Convert one sample without batching: NumPy arrays and scalars become tensors; Python
    numbers, strings and containers' types are kept (``torch.utils.data.default_convert``)."""
    return to_tensors(_collate.default_convert(data))


def _collate_into(batch: Any, allocate: Allocate) -> Any:
    _refuse_nested(batch)
    stacked = _collate.collate(
        batch, collate_fn_map=_collate.default_collate_fn_map, allocate=allocate
    )
    return to_tensors(stacked)


register_allocating_collate(default_collate, _collate_into)
# Their batches are tensors already: the loader's output step leaves them alone.
register_final_collate("torch", default_collate)
register_final_collate("torch", default_convert)
