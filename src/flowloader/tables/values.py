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
from .ragged import RaggedRecords

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
    column, as ``default_collate`` would stack the rows) when every column collates as it is,
    list columns (one array per row) kept for ``default_collate`` to stack or to name
    (:class:`.ragged.RaggedRecords`); else the rows as dicts, for ``default_collate`` to
    stack or to explain."""
    ready: dict[str, Any] = {}
    lists: list[str] = []
    for name, column in columns.items():
        if column.dtype.kind in "biuf":
            ready[name] = column
            continue
        kind = _one_type(listed := column.tolist()) if column.dtype == object else None
        if kind in (str, bytes):
            ready[name] = listed
        elif kind is np.ndarray:
            ready[name] = column
            lists.append(name)
        else:  # nulls, other types: default_collate's own rules and errors
            return rows(columns)
    return RaggedRecords(ready, lists) if lists else CollatedRecords(ready)


def _one_type(values: list[Any]) -> type | None:
    """The type every one of ``values`` has, or None when they differ (or there are none)."""
    kinds = {type(value) for value in values}
    return kinds.pop() if len(kinds) == 1 else None


def rows(columns: Columns) -> list[dict[str, Any]]:
    """The rows of gathered ``columns`` as dicts, column order kept."""
    names = list(columns)
    values = [list(columns[name]) for name in names]
    return [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]


def grouped(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, bounds): ``order`` sorts ``keys`` (stably), and ``order[bounds[g]:bounds[g +
    1]]`` are the places of the g-th smallest key."""
    order = np.argsort(keys, kind="stable")
    ranked = keys[order]
    cuts = np.flatnonzero(ranked[1:] != ranked[:-1]) + 1
    return order, np.concatenate([[0], cuts, [keys.size]])


def gather(
    blocks: Sequence[Columns], order: np.ndarray, bounds: np.ndarray, local: np.ndarray
) -> Columns:
    """The batch whose row k is row ``local[k]`` of its block, where ``blocks[g]`` holds the
    rows at places ``order[bounds[g]:bounds[g + 1]]`` (:func:`grouped`): each block's rows
    written straight to their places (one copy per column)."""
    if len(blocks) == 1:
        part = rows_of(local)
        return {name: column[part] for name, column in blocks[0].items()}
    places = [order[bounds[g] : bounds[g + 1]] for g in range(len(blocks))]
    picks = [local[at] for at in places]
    out = {}
    for name in blocks[0]:
        parts = [block[name] for block in blocks]
        first = parts[0]
        if all(p.dtype == first.dtype and p.shape[1:] == first.shape[1:] for p in parts):
            column = np.empty((local.size, *first.shape[1:]), first.dtype)
            for part, at, pick in zip(parts, places, picks, strict=True):
                column[at] = part[pick]
        else:  # blocks converted differently (nulls in some): one object per row
            column = np.empty(local.size, dtype=object)
            for part, at, pick in zip(parts, places, picks, strict=True):
                for k, value in zip(at.tolist(), list(part[pick]), strict=True):
                    column[k] = value
        out[name] = column
    return out


def rows_of(local: np.ndarray) -> Any:
    """What picks rows ``local`` out of a column: a slice (views, no copy) for a run."""
    run = run_of(local)
    return local if run is None else slice(*run)


def run_of(rows: np.ndarray) -> tuple[int, int] | None:
    """(first, last + 1) where ``rows`` are consecutive and ascending; else None."""
    if not rows.size or rows[-1] - rows[0] != rows.size - 1:
        return None
    if rows.size > 2 and not np.all(np.diff(rows) == 1):
        return None
    return int(rows[0]), int(rows[-1]) + 1


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
            return numbers(array)
        return _objects(_with_nulls(list(_filled(array)), array))
    if pt.is_fixed_size_list(kind) and _numeric(kind.value_type):
        size = kind.list_size
        values = array.values.slice(array.offset * size, len(array) * size)
        flat = numbers(values).reshape(len(array), size)
        return flat if array.null_count == 0 else _objects(_with_nulls(list(flat), array))
    if (pt.is_list(kind) or pt.is_large_list(kind)) and _numeric(kind.value_type):
        pieces = _lists(array)
        if pieces is not None:
            return _objects(_with_nulls(pieces, array))
    return _objects(array.to_pylist())


def _lists(array: pa.Array) -> list[np.ndarray] | None:
    """Each slot's values of a list array of numbers, as views of one NumPy array: the
    values behind the array (``array.values``, which ignores a slice's offset) cut at its
    offsets (a slice's own, counted from those values). Not ``flatten()``: it drops the
    values under null slots, which Arrow lets span values, and the rows after one would get
    other rows' values. None where a list holds a null value (Arrow's Python lists then)."""
    if not len(array):
        return []
    offsets = numbers(array.offsets).astype(np.int64, copy=False)
    first, last = int(offsets[0]), int(offsets[-1])
    spanned = array.values.slice(first, last - first)
    if spanned.null_count:
        return None
    flat = numbers(spanned)
    return np.split(flat, offsets[1:-1] - first)


def numbers(array: pa.Array) -> np.ndarray:
    """An array of numbers without nulls as NumPy: integers and floats a view of Arrow's
    buffer (read-only), the others through ``to_numpy``. Not ``to_numpy`` for all: in
    pyarrow 26 it imports pandas, which costs every worker process that has not (0.3-0.8
    s at its first batch, more than an epoch of a small table)."""
    kind = array.type
    if pt.is_integer(kind) or pt.is_floating(kind):
        dtype = np.dtype(kind.to_pandas_dtype())
        data = array.buffers()[1]
        if data is None:  # no values at all
            return np.empty(0, dtype)
        view = np.frombuffer(data, dtype, count=len(array), offset=array.offset * dtype.itemsize)
        view.flags.writeable = False
        return view
    if pt.is_boolean(kind):
        return _bits(array.buffers()[1], array.offset, len(array))
    return array.to_numpy(zero_copy_only=False)


def _bits(buffer: pa.Buffer | None, offset: int, length: int) -> np.ndarray:
    """Arrow's bit-packed booleans (values or validity) as a NumPy bool array."""
    if buffer is None:
        return np.zeros(length, dtype=bool)
    bits = np.unpackbits(np.frombuffer(buffer, np.uint8), bitorder="little")
    return bits[offset : offset + length].astype(bool)


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
    return numbers(array.fill_null(zero))


def _with_nulls(values: list[Any], array: pa.Array) -> list[Any]:
    if array.null_count == 0:
        return values
    valid = _bits(array.buffers()[0], array.offset, len(array))
    if array.buffers()[0] is None:  # nulls without a validity bitmap (a null-typed array)
        valid = np.asarray(numbers(pc.is_valid(array)), dtype=bool)
    return [value if ok else None for value, ok in zip(values, valid, strict=True)]


def _objects(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    _fill(out, values)
    return out


def _fill(out: np.ndarray, values: list[Any]) -> None:
    """Put each value in one slot (NumPy would broadcast a list of equal-length arrays)."""
    for i, value in enumerate(values):
        out[i] = value
