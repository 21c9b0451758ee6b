"""The drop-in's ``default_collate`` and ``default_convert``: torch's rules, handing out tensors.

Each is flowloader's NumPy function with every numeric array then wrapped as a tensor sharing
its memory (``torch.from_numpy``), which is what a loader's ``output="torch"`` step does to a
batch. So a loader with that output runs the NumPy function in their place (see
``_output.register_numpy_form``): inside a worker it stacks straight into shared memory, and
the tensors are made once, in the consumer. Called directly, as a user's ``collate_fn`` may,
they return tensors. Imported only where torch is installed.
"""

from __future__ import annotations

from typing import Any

from flowloader import collate as _collate
from flowloader._compat import torch as _torch
from flowloader._output import map_arrays, register_numpy_form

__all__ = ["default_collate", "default_convert"]


def to_tensors(batch: Any) -> Any:
    """``batch`` with its numeric NumPy arrays as tensors sharing their memory: the walk the
    loader's ``output="torch"`` step makes."""
    return map_arrays(batch, _torch.to_tensor)


def default_collate(batch: list[Any]) -> Any:
    """Stack a list of samples into a batch of torch tensors, keeping the sample's structure
    (``torch.utils.data.default_collate``'s rules)."""
    return to_tensors(_collate.default_collate(batch))


def default_convert(data: Any) -> Any:
    """Convert one sample without batching: NumPy arrays and scalars become tensors; Python
    numbers, strings and containers' types are kept (``torch.utils.data.default_convert``)."""
    return to_tensors(_collate.default_convert(data))


register_numpy_form(default_collate, "torch", _collate.default_collate)
register_numpy_form(default_convert, "torch", _collate.default_convert)
