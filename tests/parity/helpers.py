"""Turn torch outputs into NumPy so both loaders' batches compare structurally."""

from __future__ import annotations

import collections.abc
import copy
from typing import Any

from ..trees import assert_same_tree

__all__ = ["assert_same_tree", "raised", "to_numpy_tree"]


def to_numpy_tree(obj: Any) -> Any:
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.numpy()
    if isinstance(obj, collections.abc.Mapping):
        clone = copy.copy(obj)
        clone.update({k: to_numpy_tree(v) for k, v in obj.items()})
        return clone
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(to_numpy_tree(v) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_numpy_tree(v) for v in obj)
    return obj


def raised(action) -> type[BaseException]:
    """The type of the exception ``action()`` raises (fails the test if it raises none)."""
    try:
        action()
    except Exception as error:  # the point is to compare whatever each library raises
        return type(error)
    raise AssertionError(f"{action} raised nothing")
