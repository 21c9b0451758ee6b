"""Turn a list of samples into a batch (``default_collate``) or convert one (``default_convert``).

The rules follow PyTorch's, with NumPy arrays in the role of tensors: arrays and NumPy scalars
are stacked along a new first axis; Python ints become int64, floats float64, bools bool;
strings and bytes stay lists; mappings, namedtuples and sequences are collated field by field.
Torch tensors are stacked with torch when the program uses torch.

``collate(batch, collate_fn_map=...)`` dispatches on the type of the first sample through a
``type -> function`` registry, so a custom collate function can extend
:data:`default_collate_fn_map` instead of re-implementing the recursion.
"""

from __future__ import annotations

import collections.abc
import copy
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._compat import torch as _torch
from .batching import Allocate, CollatedSamples

__all__ = [
    "collate",
    "default_collate",
    "default_collate_fn_map",
    "default_convert",
]

CollateFn = Callable[..., Any]

# dtype strings of arrays that cannot be stacked into a numeric batch: bytes, str, object.
_NON_NUMERIC_DTYPE = re.compile(r"[SaUO]")

_UNSUPPORTED = (
    "default_collate: batch must contain arrays, numbers, strings, dicts or lists; found {}"
)


class _Located(Exception):
    """Mixin: an error that can say where in the sample structure it happened."""

    location: str | None = None

    def __str__(self) -> str:
        message = super().__str__()
        return f"{message} (in {self.location})" if self.location else message


class CollateTypeError(_Located, TypeError):
    """A sample holds a type that cannot be collated."""


class CollateShapeError(_Located, RuntimeError):
    """Samples disagree in shape or length where they must agree."""


def _render_path(path: tuple) -> str:
    return "sample" + "".join(f"[{key!r}]" for key in path)


def _check_equal_shapes(batch: list[Any], what: str) -> None:
    shape = tuple(batch[0].shape)
    for position, item in enumerate(batch):
        if tuple(item.shape) != shape:
            raise CollateShapeError(
                f"default_collate: {what} must have equal shapes to be stacked, but batch "
                f"element 0 has shape {shape} and element {position} has shape {tuple(item.shape)}"
            )


def collate_numpy_array_fn(
    batch: list[np.ndarray], *, collate_fn_map: Any = None, allocate: Allocate | None = None
) -> np.ndarray:
    """Stack arrays along a new first axis; into ``allocate``'s array when given (a worker's
    shared memory: the batch is written once, where it travels)."""
    first = batch[0]
    if _NON_NUMERIC_DTYPE.search(first.dtype.str) is not None:
        raise CollateTypeError(_UNSUPPORTED.format(f"array of dtype {first.dtype}"))
    _check_equal_shapes(batch, "arrays")
    if allocate is None:
        return np.stack(batch)
    dtype = first.dtype
    if any(array.dtype != dtype for array in batch):
        dtype = np.result_type(*batch)  # what np.stack would promote to
    return np.stack(batch, out=allocate((len(batch), *first.shape), dtype))


def _no_nulls(batch: Sequence[Any]) -> None:
    """Values with a None among them (a table's null) cannot be stacked: say which."""
    nulls = [i for i, x in enumerate(batch) if x is None]
    other = next((i for i, x in enumerate(batch) if x is not None), None)
    if not nulls or other is None:  # none, or nothing but None (an unsupported type)
        return
    raise CollateTypeError(
        f"default_collate: batch elements {nulls} are None (a missing value, such as a "
        f"table's null) where element {other} is a {type(batch[other]).__name__}; fill "
        "them in the dataset or pass a collate_fn that handles them"
    )


def collate_numpy_scalar_fn(batch: list[Any], *, collate_fn_map: Any = None) -> np.ndarray:
    array = np.array(batch)
    if array.dtype == object:  # a None among the numbers comes out so: looked for only then
        _no_nulls(batch)
    return array


def collate_float_fn(batch: list[float], *, collate_fn_map: Any = None) -> np.ndarray:
    array = np.array(batch, dtype=np.float64)
    if np.isnan(array).any():  # a None comes out as NaN: looked for only then
        _no_nulls(batch)
    return array


def collate_int_fn(batch: list[int], *, collate_fn_map: Any = None) -> np.ndarray:
    """Python ints -> int64; all bools -> bool; ints mixed with floats -> float32 (torch's rule)."""
    if all(type(x) is bool for x in batch):
        return np.array(batch, dtype=np.bool_)
    array = np.array(batch)
    if array.dtype.kind in "bi":
        return array.astype(np.int64, copy=False)
    if array.dtype.kind == "f":
        return array.astype(np.float32)
    _no_nulls(batch)  # a None among the ints: say so rather than what follows
    raise CollateTypeError(
        _UNSUPPORTED.format(f"ints outside the int64 range or mixed with other types: {batch!r}")
    )


def collate_str_fn(batch: list[Any], *, collate_fn_map: Any = None) -> list[Any]:
    return batch


def collate_tensor_fn(
    batch: list[Any], *, collate_fn_map: Any = None, allocate: Allocate | None = None
) -> Any:
    _torch.check_stackable(batch[0])
    _check_equal_shapes(batch, "tensors")
    return _torch.stack(batch, allocate)


# The built-in rules that stack into ``allocate``'s arrays (a user's rules are not given it).
_STACKING = frozenset({collate_numpy_array_fn, collate_tensor_fn})

#: The collate function for each element type: ``collate(batch, collate_fn_map=...)``'s
#: default.
default_collate_fn_map: dict[type | tuple[type, ...], CollateFn] = {
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def _lookup(elem: Any, collate_fn_map: dict) -> CollateFn | None:
    elem_type = type(elem)
    if elem_type in collate_fn_map:
        return collate_fn_map[elem_type]
    for collate_type, fn in collate_fn_map.items():
        if isinstance(elem, collate_type):
            return fn
    if _torch.is_tensor(elem):
        return collate_tensor_fn
    return None


def collate(
    batch: list[Any], *, collate_fn_map: dict | None = None, allocate: Allocate | None = None
) -> Any:
    """Collate ``batch`` (a list of samples), dispatching on the type of ``batch[0]``.

    ``allocate(shape, dtype)``: where the built-in rules stack arrays and tensors (the loader
    passes a worker's shared memory; see :mod:`flowloader.batching`)."""
    if isinstance(batch, CollatedSamples):
        return batch.collated()
    return _collate(batch, _Rules(collate_fn_map or {}, allocate), ())


class _Rules:
    """The registry one collate call dispatches through, and where its stacks go."""

    __slots__ = ("allocate", "collate_fn_map")

    def __init__(self, collate_fn_map: dict, allocate: Allocate | None) -> None:
        self.collate_fn_map, self.allocate = collate_fn_map, allocate


def _collate(batch: Sequence[Any], rules: _Rules, path: tuple) -> Any:
    try:
        return _collate_here(batch, rules, path)
    except _Located as error:
        # The innermost level that sees the error knows the deepest location; keep it.
        if error.location is None and path:
            error.location = _render_path(path)
        raise


def _collate_here(batch: Sequence[Any], rules: _Rules, path: tuple) -> Any:
    try:
        return _dispatch(batch, rules, path)
    except _Located:
        raise
    except (TypeError, AttributeError, ValueError, IndexError, KeyError) as error:
        # Samples of different kinds at one place (a list where another sample has an int)
        # fail deep inside NumPy or the rules above; say so instead.
        kind = type(batch[0])
        other = next((i for i, sample in enumerate(batch) if type(sample) is not kind), None)
        if other is None:
            raise
        raise CollateTypeError(
            f"default_collate: batch element 0 is a {kind.__name__} but element {other} is a "
            f"{type(batch[other]).__name__}; every sample must have the same structure"
        ) from error


def _dispatch(batch: Sequence[Any], rules: _Rules, path: tuple) -> Any:
    elem = batch[0]
    fn = _lookup(elem, rules.collate_fn_map)
    if fn is not None:
        if rules.allocate is not None and fn in _STACKING:
            return fn(batch, collate_fn_map=rules.collate_fn_map, allocate=rules.allocate)
        return fn(batch, collate_fn_map=rules.collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        return _collate_mapping(batch, rules, path)
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return type(elem)(*_collate_columns(batch, rules, path))
    if isinstance(elem, collections.abc.Sequence):
        columns = _collate_columns(batch, rules, path)
        if isinstance(elem, tuple):
            return columns  # tuples become lists, as in PyTorch
        return _rebuild_sequence(elem, columns)
    _no_nulls(batch)
    raise CollateTypeError(_UNSUPPORTED.format(type(elem)))


def _collate_mapping(batch: Sequence[Any], rules: _Rules, path: tuple) -> Any:
    elem = batch[0]
    collated = {}
    for key in elem:
        try:
            values = [sample[key] for sample in batch]
        except KeyError:
            missing = next(i for i, s in enumerate(batch) if key not in s)
            raise KeyError(
                f"default_collate: key {key!r} is in batch element 0 but not in element {missing}"
            ) from None
        collated[key] = _collate(values, rules, (*path, key))
    return _rebuild_mapping(elem, collated)


def _rebuild_mapping(elem: Any, collated: dict) -> Any:
    """Keep the sample's mapping type where it can be rebuilt, else return a dict."""
    try:
        if isinstance(elem, collections.abc.MutableMapping):
            clone = copy.copy(elem)
            clone.update(collated)
            return clone
        return type(elem)(collated)
    except TypeError:
        return collated


def _collate_columns(batch: Sequence[Any], rules: _Rules, path: tuple) -> list[Any]:
    size = len(batch[0])
    for position, sample in enumerate(batch):
        if len(sample) != size:
            raise CollateShapeError(
                "default_collate: each element in list of batch should be of equal size, but "
                f"batch element 0 has {size} fields and element {position} has {len(sample)}"
            )
    # Columns stay tuples (as zip makes them): a column of strings collates to a tuple, as in
    # PyTorch.
    columns = zip(*batch, strict=True)
    return [_collate(column, rules, (*path, i)) for i, column in enumerate(columns)]


def _rebuild_sequence(elem: Any, columns: list[Any]) -> Any:
    """Keep the sample's sequence type where it can be rebuilt, else return a list."""
    try:
        if isinstance(elem, collections.abc.MutableSequence):
            clone = copy.copy(elem)
            for i, column in enumerate(columns):
                clone[i] = column
            return clone
        return type(elem)(columns)
    except TypeError:
        return columns


def default_collate(batch: list[Any]) -> Any:
    """Stack a list of samples into a batch of NumPy arrays, keeping the sample's structure.

    >>> default_collate([(np.zeros(2, np.float32), 1), (np.ones(2, np.float32), 0)])
    [array([[0., 0.],
           [1., 1.]], dtype=float32), array([1, 0])]
    """
    return collate(batch, collate_fn_map=default_collate_fn_map)


def default_convert(data: Any) -> Any:
    """Convert one sample without batching (used when ``batch_size=None``).

    NumPy scalars become 0-d arrays; arrays, torch tensors and Python values are kept;
    containers are converted element by element (tuples become lists, as in PyTorch).
    """
    if isinstance(data, np.ndarray) or _torch.is_tensor(data):
        return data
    if isinstance(data, (np.bool_, np.number)):
        return np.asarray(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data
