"""Turn torch outputs into NumPy so both loaders' batches compare structurally."""

from __future__ import annotations

import collections.abc
import copy
from typing import Any

import numpy as np


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


def assert_same_tree(ours: Any, theirs: Any, where: str = "batch") -> None:
    """Same container types, keys, shapes, dtypes and values."""
    if isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray), f"{where}: {type(ours)} is not an array"
        assert ours.dtype == theirs.dtype, f"{where}: dtype {ours.dtype} != {theirs.dtype}"
        assert ours.shape == theirs.shape, f"{where}: shape {ours.shape} != {theirs.shape}"
        np.testing.assert_array_equal(ours, theirs, err_msg=where)
        return
    assert type(ours) is type(theirs), f"{where}: {type(ours)} != {type(theirs)}"
    if isinstance(theirs, collections.abc.Mapping):
        assert list(ours) == list(theirs), f"{where}: keys differ"
        for key in theirs:
            assert_same_tree(ours[key], theirs[key], f"{where}[{key!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), f"{where}: lengths differ"
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            assert_same_tree(a, b, f"{where}[{i}]")
    else:
        assert ours == theirs, f"{where}: {ours!r} != {theirs!r}"


def raised(action) -> type[BaseException]:
    """The type of the exception ``action()`` raises (fails the test if it raises none)."""
    try:
        action()
    except Exception as error:  # the point is to compare whatever each library raises
        return type(error)
    raise AssertionError(f"{action} raised nothing")
