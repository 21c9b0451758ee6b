"""Split a batch into its structure and its array leaves, and join them back.

Plain containers (list, tuple, dict, namedtuple, copyable mutable mappings) are walked; NumPy
arrays without Python objects (and, on request, CPU torch tensors that NumPy can view) become
numbered slots; anything else stays in the structure and travels pickled with the message.
"""

from __future__ import annotations

import collections.abc
import copy
from typing import Any

import numpy as np

from .._compat import torch as _torch


class Slot(int):
    """Placeholder for the array leaf number ``int(self)``. An int subclass: unpickling one
    runs no Python code (a class with ``__init__`` ran a Python call per leaf per batch)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Slot({int(self)})"


def is_array_leaf(value: Any) -> bool:
    return type(value) is np.ndarray and not value.dtype.hasobject


def is_array_or_tensor_leaf(value: Any) -> bool:
    return is_array_leaf(value) or _torch.as_shareable_array(value) is not None


def split(batch: Any, *, tensors: bool = False) -> tuple[Any, list[Any]]:
    """(structure with Slots in place of arrays, the arrays in slot order). With ``tensors``,
    CPU torch tensors that NumPy can view are leaves too (returned as the tensors)."""
    leaves: list[Any] = []
    return _split(batch, (leaves, is_array_or_tensor_leaf if tensors else is_array_leaf)), leaves


def join(structure: Any, arrays: list[np.ndarray]) -> Any:
    """Rebuild the batch from :func:`split`'s structure and (possibly other) arrays."""
    return _join(structure, arrays)


# Module-level recursion on purpose: a recursive closure is a reference cycle, which would keep
# the batch's arrays (and so their shared memory) alive until the cyclic GC happens to run.
def _split(value: Any, context: tuple[list[Any], Any]) -> Any:
    leaves, is_leaf = context
    if is_leaf(value):
        leaves.append(value)
        return Slot(len(leaves) - 1)
    return _map_container(value, _split, context)


def _join(value: Any, arrays: list[np.ndarray]) -> Any:
    if type(value) is Slot:
        return arrays[value]
    return _map_container(value, _join, arrays)


def _map_container(value: Any, fn: Any, context: Any) -> Any:
    kind = type(value)
    if kind is list:
        return [fn(v, context) for v in value]
    if kind is tuple:
        return tuple(fn(v, context) for v in value)
    if kind is dict:
        return {k: fn(v, context) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return kind(*(fn(v, context) for v in value))
    if isinstance(value, collections.abc.MutableMapping):
        clone = copy.copy(value)
        for key in value:
            clone[key] = fn(value[key], context)
        return clone
    return value
