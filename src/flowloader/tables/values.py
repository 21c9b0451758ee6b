"""Arrow columns as the values a row hands out: numbers as NumPy scalars, lists and
fixed-size lists of numbers as NumPy arrays, strings as ``str``, binary as ``bytes``, nulls
as ``None``; other types (structs, lists of strings) as Arrow's Python values.

A block (a row group, a record batch) is converted once, column by column, into NumPy
arrays: numbers without nulls as they are (a view of Arrow's memory where Arrow allows),
fixed-size lists as 2-D arrays, everything else as object arrays of ready values. Gathering a
batch's rows from blocks is then NumPy indexing, and a row is a dict of one element of each.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

from ..batching import CollatedRecords

Columns = dict[str, np.ndarray]


def numpy_columns(table: pa.Table, writable: bool = False) -> Columns:
    """Every column of ``table`` as one NumPy array of its rows' values; ``writable``: no
    read-only view of Arrow's memory (a decoded block is the reader's own, and torch warns
    at every read-only array it is given)."""
    columns = {name: _column(table.column(name)) for name in table.column_names}
    if writable:
        columns = {n: c if c.flags.writeable else c.copy() for n, c in columns.items()}
    return columns


def positions(indices: Sequence[int], n: int) -> np.ndarray:
    """``indices`` as non-negative row numbers of a table of ``n`` rows (negative ones count
    from the end); IndexError naming the first out of range."""
    asked = np.asarray(indices, dtype=np.int64).reshape(-1)
    if asked.size and (asked.min() < -n or asked.max() >= n):
        bad = int(asked[(asked < -n) | (asked >= n)][0])
        raise IndexError(f"index {bad} is out of range for a table of {n} rows")
    return np.where(asked < 0, asked + n, asked)


def items(columns: Columns, item_column: str | None) -> Sequence[Any]:
    """A batch's rows: ``item_column``'s values, where the rows are one column's values,
    else dicts (:func:`batch`)."""
    if item_column is None:
        return batch(columns)
    return list(columns[item_column])


def batch(columns: Columns) -> Sequence[dict[str, Any]]:
    """A batch's rows from its gathered ``columns``: already collated (one array or list per
    column, as ``default_collate`` would stack the rows) when every column collates as it is;
    else the rows as dicts, for ``default_collate`` to stack or to explain."""
    ready: dict[str, Any] = {}
    for name, column in columns.items():
        if column.dtype.kind in "biuf":
            ready[name] = column
        elif column.dtype == object and _one_type(listed := column.tolist()) in (str, bytes):
            ready[name] = listed
        else:  # nulls, ragged lists, other types: default_collate's own rules and errors
            return rows(columns)
    return CollatedRecords(ready)


def _one_type(values: list[Any]) -> type | None:
    """The type every one of ``values`` has, or None when they differ (or there are none)."""
    kinds = {type(value) for value in values}
    return kinds.pop() if len(kinds) == 1 else None


def rows(columns: Columns) -> list[dict[str, Any]]:
    """The rows of gathered ``columns`` as dicts, column order kept."""
    names = list(columns)
    values = [list(columns[name]) for name in names]
    return [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]


def gather(blocks: Sequence[Columns], which: np.ndarray, local: np.ndarray) -> Columns:
    """The rows ``local[k]`` of ``blocks[which[k]]``, in the order of k."""
    if len(blocks) == 1:
        part = rows_of(local)
        return {name: column[part] for name, column in blocks[0].items()}
    order = np.argsort(which, kind="stable")
    bounds = np.searchsorted(which[order], np.arange(len(blocks) + 1))
    back = np.empty_like(order)
    back[order] = np.arange(order.size)
    picks = [local[order[bounds[b] : bounds[b + 1]]] for b in range(len(blocks))]
    out = {}
    for name in blocks[0]:
        parts = [block[name][pick] for block, pick in zip(blocks, picks, strict=True)]
        out[name] = _concatenate(parts)[back]
    return out


def rows_of(local: np.ndarray) -> Any:
    """What picks rows ``local`` out of a column: a slice (views, no copy) for a run."""
    if local.size and local[-1] - local[0] == local.size - 1 and np.all(np.diff(local) == 1):
        return slice(int(local[0]), int(local[-1]) + 1)
    return local


def joined(parts: list[np.ndarray]) -> np.ndarray:
    """One column from its blocks' arrays (object arrays where their types differ)."""
    return _concatenate(parts)


def block_of(whole: Columns, starts: np.ndarray, block: int) -> Columns:
    """Block ``block``'s rows of joined columns (views)."""
    part = slice(int(starts[block]), int(starts[block + 1]))
    return {name: column[part] for name, column in whole.items()}


def nbytes(columns: Columns) -> int:
    return sum(column.nbytes for column in columns.values())


def _concatenate(parts: list[np.ndarray]) -> np.ndarray:
    if len({(part.dtype, part.ndim) for part in parts}) == 1:
        return np.concatenate(parts)
    joined = np.empty(sum(len(p) for p in parts), dtype=object)
    start = 0
    for part in parts:
        _fill(joined[start : start + len(part)], list(part))
        start += len(part)
    return joined


def _column(column: pa.ChunkedArray) -> np.ndarray:
    array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if pt.is_dictionary(array.type):
        array = array.dictionary_decode()
    kind = array.type
    if _numeric(kind):
        if array.null_count == 0:
            return array.to_numpy(zero_copy_only=False)
        return _objects(_with_nulls(list(_filled(array)), array))
    if pt.is_fixed_size_list(kind) and _numeric(kind.value_type):
        size = kind.list_size
        values = array.values.slice(array.offset * size, len(array) * size)
        flat = values.to_numpy(zero_copy_only=False).reshape(len(array), size)
        return flat if array.null_count == 0 else _objects(_with_nulls(list(flat), array))
    if (pt.is_list(kind) or pt.is_large_list(kind)) and _numeric(kind.value_type):
        offsets = array.offsets.to_numpy(zero_copy_only=False)
        flat = array.flatten().to_numpy(zero_copy_only=False)
        pieces = np.split(flat, (offsets - offsets[0])[1:-1])
        return _objects(_with_nulls(pieces, array))
    return _objects(array.to_pylist())


def _numeric(kind: pa.DataType) -> bool:
    return bool(
        pt.is_integer(kind) or pt.is_floating(kind) or pt.is_boolean(kind) or pt.is_temporal(kind)
    )


def _filled(array: pa.Array) -> np.ndarray:
    """The values with nulls as zeros, in the column's NumPy type."""
    if pt.is_boolean(array.type):
        zero = pa.scalar(False)
    elif pt.is_temporal(array.type):
        zero = pa.scalar(0, pa.int64()).cast(array.type)
    else:
        zero = pa.scalar(0, array.type)
    return array.fill_null(zero).to_numpy(zero_copy_only=False)


def _with_nulls(values: list[Any], array: pa.Array) -> list[Any]:
    if array.null_count == 0:
        return values
    valid = np.asarray(pc.is_valid(array).to_numpy(zero_copy_only=False), dtype=bool)
    return [value if ok else None for value, ok in zip(values, valid, strict=True)]


def _objects(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    _fill(out, values)
    return out


def _fill(out: np.ndarray, values: list[Any]) -> None:
    """Put each value in one slot (NumPy would broadcast a list of equal-length arrays)."""
    for i, value in enumerate(values):
        out[i] = value
