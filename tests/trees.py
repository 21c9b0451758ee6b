"""Comparing two batches: the same container types, keys, shapes, dtypes and values."""

from __future__ import annotations

import collections.abc
from typing import Any

import numpy as np


def assert_same_tree(ours: Any, theirs: Any, where: str = "batch") -> None:
    """Fails with the location of the first difference."""
    assert type(ours) is type(theirs), f"{where}: {type(ours)} != {type(theirs)}"
    if isinstance(theirs, np.ndarray):
        assert ours.dtype == theirs.dtype, f"{where}: dtype {ours.dtype} != {theirs.dtype}"
        assert ours.shape == theirs.shape, f"{where}: shape {ours.shape} != {theirs.shape}"
        np.testing.assert_array_equal(ours, theirs, err_msg=where)
    elif isinstance(theirs, collections.abc.Mapping):
        assert list(ours) == list(theirs), f"{where}: keys differ"
        for key in theirs:
            assert_same_tree(ours[key], theirs[key], f"{where}[{key!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), f"{where}: lengths differ"
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            assert_same_tree(a, b, f"{where}[{i}]")
    else:
        assert ours == theirs, f"{where}: {ours!r} != {theirs!r}"
