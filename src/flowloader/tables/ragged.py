"""Ragged list columns (token ids, variable-length features): how a table's batch carries
them, what ``default_collate`` says about them, and :class:`PadCollate`, the collate function
that pads them, as ``torch.nn.utils.rnn.pad_sequence(batch_first=True)`` does, and hands the
lengths beside them.

A table's batch whose list columns are all the same length in the batch collates as before
(``default_collate`` stacks them). Where they differ, no stack exists: ``default_collate``
names the column and the lengths (a ``CollateShapeError``, a ``RuntimeError``) and points here,
instead of listing the batch's rows.
"""

from __future__ import annotations

import collections.abc
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..batching import CollatedRecords
from ..collate import CollateShapeError, default_collate

__all__ = ["PadCollate"]


class RaggedRecords(CollatedRecords):
    """A table's batch with list columns (``lists``: their names), each an object array of
    one NumPy array per row. ``default_collate`` stacks those columns where every row of the
    batch has as many values (as it would stack the rows' arrays), and otherwise raises a
    ``CollateShapeError`` naming the column and its lengths; :class:`PadCollate` pads them."""

    def __init__(self, columns: dict[str, Any], lists: list[str]) -> None:
        super().__init__(columns)
        self.lists = list(lists)

    def collated(self) -> dict[str, Any]:  # type: ignore[override]
        """The batch as ``default_collate`` gives it: the list columns stacked."""
        out = super().collated()
        for name in self.lists:
            column = out[name]
            lengths = {len(value) for value in column}
            if len(lengths) > 1:
                raise CollateShapeError(
                    f"default_collate: column {name!r} holds lists of different lengths "
                    f"({min(lengths)} to {max(lengths)} values in a batch of {len(column)} "
                    "rows), which cannot be stacked; pass "
                    "collate_fn=flowloader.tables.PadCollate() for them padded, with their "
                    "lengths (pad_to=N: always N long)"
                )
            out[name] = np.stack(list(column))
        return out


class PadCollate:
    """A ``collate_fn`` that pads list-valued fields to one length, with their lengths:
    ``DataLoader(table, batch_size=32, collate_fn=PadCollate(pad_to=512))``.

    For dict samples (a table's rows), each field in ``columns`` (default: every field whose
    values are lists or arrays) becomes one array of shape ``(batch, length, ...)``, its rows
    padded with ``padding_value`` on ``padding_side`` (``"right"`` or ``"left"``), as
    ``torch.nn.utils.rnn.pad_sequence(..., batch_first=True)`` pads them; beside it,
    ``lengths.format(name)`` (default ``"<name>_lengths"``) holds each row's number of values
    (int64). ``length`` is ``pad_to`` when given (a longer row is a ValueError naming the
    column and the row), else the batch's longest. A null (None) is an empty list. The
    other fields are collated by ``default_collate``. Samples that are lists or arrays
    themselves (a table read with ``columns="tokens"``) give ``(padded, lengths)``.
    """

    def __init__(
        self,
        pad_to: int | None = None,
        padding_value: Any = 0,
        padding_side: str = "right",
        columns: Sequence[str] | None = None,
        lengths: str = "{}_lengths",
    ) -> None:
        if pad_to is not None and (not isinstance(pad_to, int) or pad_to < 0):
            raise ValueError(f"PadCollate: pad_to should be a non-negative int, got {pad_to!r}")
        if padding_side not in ("right", "left"):
            raise ValueError(
                f"PadCollate: padding_side should be 'right' or 'left', got {padding_side!r}"
            )
        if isinstance(columns, str):
            columns = [columns]
        self.pad_to, self.padding_value, self.padding_side = pad_to, padding_value, padding_side
        self.columns = None if columns is None else list(columns)
        self.lengths = lengths

    def __call__(self, batch: Sequence[Any]) -> Any:
        """The batch with its list fields padded (see the class)."""
        if not len(batch):
            raise ValueError("PadCollate: an empty batch")
        if isinstance(batch, CollatedRecords):
            return self._records(batch)
        if not isinstance(batch[0], collections.abc.Mapping):
            if self.columns is not None:
                raise TypeError(
                    f"PadCollate: columns={self.columns} names fields of dict samples, but "
                    f"the samples are {type(batch[0]).__name__}"
                )
            return self._pad("the samples", list(batch))
        names = list(batch[0])
        padded = self._chosen(names, lambda name: [sample.get(name) for sample in batch])
        rest = [{k: v for k, v in sample.items() if k not in padded} for sample in batch]
        others = default_collate(rest) if rest[0] else {}
        return self._assemble(names, padded, others)

    def _records(self, batch: CollatedRecords) -> dict[str, Any]:
        """A table's batch: its columns as they are, the list columns padded."""
        columns = dict(zip(batch.names, batch.columns, strict=True))
        padded = self._chosen(list(columns), columns.__getitem__)
        return self._assemble(list(columns), padded, columns)

    def _chosen(self, names: list[str], values_of: Any) -> dict[str, tuple[np.ndarray, Any]]:
        """The fields to pad, padded: ``columns``, or every field holding lists."""
        if self.columns is not None:
            missing = [name for name in self.columns if name not in names]
            if missing:
                raise KeyError(f"PadCollate: no field {missing} in the batch; it has {names}")
            chosen = self.columns
        else:
            chosen = [name for name in names if _holds_lists(values_of(name))]
        return {name: self._pad(f"column {name!r}", values_of(name)) for name in chosen}

    def _assemble(
        self, names: list[str], padded: dict[str, tuple[np.ndarray, Any]], others: Any
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in names:
            if name not in padded:
                out[name] = others[name]
                continue
            key = self.lengths.format(name)
            if key in names:
                raise ValueError(
                    f"PadCollate: the lengths of {name!r} would replace the field {key!r}; "
                    "pass lengths= another name (a format string such as '{}_len')"
                )
            out[name], out[key] = padded[name]
        return out

    def _pad(self, what: str, values: Any) -> tuple[np.ndarray, np.ndarray]:
        """(padded, lengths) of one field's values (a 2-D+ array: rows of one length)."""
        if isinstance(values, np.ndarray) and values.dtype != object and values.ndim >= 2:
            rows = list(values)
        else:
            rows = [np.empty(0) if v is None else np.asarray(v) for v in values]
        for k, row in enumerate(rows):
            if row.ndim == 0:
                raise TypeError(
                    f"PadCollate: {what}: row {k} is {row.item()!r}, not a list or array"
                )
        # What tells the type and the trailing shape: rows with values, and arrays (a
        # table's empty lists keep their type); not an empty Python list or a null.
        typed = [
            r
            for r, v in zip(rows, values, strict=True)
            if v is not None and (len(r) or isinstance(v, np.ndarray))
        ]
        lengths = np.array([len(r) for r in rows], dtype=np.int64)
        longest = int(lengths.max())
        size = longest if self.pad_to is None else self.pad_to
        if longest > size:
            k = int(np.argmax(lengths))
            raise ValueError(
                f"PadCollate: {what}: row {k} of the batch has {longest} values, more than "
                f"pad_to={self.pad_to}; shorten the rows in the dataset or raise pad_to"
            )
        tails = {r.shape[1:] for r in typed}
        if len(tails) > 1:
            raise CollateShapeError(
                f"PadCollate: {what}: rows of shapes {sorted(tails)} beyond their first axis "
                "cannot be padded into one array"
            )
        tail = tails.pop() if tails else ()
        kinds = {r.dtype for r in typed}
        dtype = np.result_type(*kinds) if kinds else np.asarray(self.padding_value).dtype
        out = np.full((len(rows), size, *tail), self.padding_value, dtype=dtype)
        for k, row in enumerate(rows):
            if len(row):
                if self.padding_side == "right":
                    out[k, : len(row)] = row
                else:
                    out[k, size - len(row) :] = row
        return out, lengths

    def __repr__(self) -> str:
        return (
            f"PadCollate(pad_to={self.pad_to}, padding_value={self.padding_value!r}, "
            f"padding_side={self.padding_side!r}, columns={self.columns})"
        )


def _holds_lists(values: Any) -> bool:
    """Whether a field's values are lists or arrays (a 2-D+ array: rows of fixed-size
    lists), strings and scalars not."""
    if isinstance(values, np.ndarray) and values.dtype != object:
        return values.ndim >= 2
    first = next((v for v in values if v is not None), None)
    return isinstance(first, (list, tuple)) or (isinstance(first, np.ndarray) and first.ndim >= 1)
