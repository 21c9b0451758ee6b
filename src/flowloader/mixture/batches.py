"""One batch of a Mixture from its sources' parts.

Each source loads its part of the batch on its own batch path (``__getitems__``). A source
whose batch path builds its columns through ``allocate`` (a vision dataset decodes its images
straight into the batch) is called once per run of consecutive places it serves, and handed a
view of the batch's own column at those places: the images land in the batch where they belong,
in the worker's shared memory, and nothing is copied. Any other source gets its whole part in
one call. Columns built elsewhere (labels, a source without ``allocate``) are copied into the
batch's; a part that is not stacked (``CollatedSamples``), or does not match, turns the batch
into a list of samples, which collate stacks as usual. A batch from one source is that
source's batch as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..batching import Allocate, CollatedRecords, CollatedSamples, allocate_empty

# (the batch places a part fills, load(allocate) -> its samples); a part whose places are
# consecutive is offered the batch's own memory through allocate
Part = tuple[list[int], Callable[[Allocate | None], Any]]


def runs(places: list[int]) -> list[list[int]]:
    """``places`` (increasing) cut into runs of consecutive ones."""
    cuts = np.flatnonzero(np.diff(places) != 1) + 1
    return [run.tolist() for run in np.split(np.asarray(places), cuts)]


def load_batch(parts: list[Part], size: int, allocate: Allocate | None) -> Any:
    """The batch whose places ``at`` hold ``load(...)``, for each ``(at, load)``."""
    if len(parts) == 1:
        return parts[0][1](allocate)
    batch = _Batch(size, allocate or allocate_empty)
    for at, load in parts:
        consecutive = at[-1] - at[0] + 1 == len(at)
        batch.add(at, load(batch.allocator(at[0], at[-1] + 1) if consecutive else None))
    return batch.result()


class _Batch:
    def __init__(self, size: int, allocate: Allocate) -> None:
        self.size, self._allocate = size, allocate
        self._columns: list[Any] = []
        self._samples: list[Any] | None = None
        self._filled: list[int] = []  # the places that hold their samples

    def allocator(self, start: int, stop: int) -> Allocate:
        """The run's ``allocate``: its k-th array is column k's rows start..stop-1."""
        calls = iter(range(1 << 30))

        def allocate(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
            k = next(calls)
            rows = (stop - start, *shape[1:])
            if self._samples is None and tuple(shape) == rows:
                if k == len(self._columns):
                    self._columns.append(self._allocate((self.size, *shape[1:]), dtype))
                column = self._columns[k] if k < len(self._columns) else None
                if column is not None and _array_like(column, shape, dtype):
                    return column[start:stop]
            return np.empty(shape, dtype)

        return allocate

    def add(self, at: list[int], part: Any) -> None:
        stacked = type(part) is CollatedSamples  # not CollatedRecords: their rows are dicts
        if self._samples is None and stacked and self._fits(part):
            for k, piece in enumerate(part.columns):
                if k == len(self._columns):
                    self._columns.append(self._new_column(piece))
                _place(self._columns[k], at, piece)
            self._filled.extend(at)
            return
        samples = self._as_samples()
        if isinstance(part, CollatedRecords):
            part = [part[k] for k in range(len(at))]  # dicts of values of fresh columns
        elif isinstance(part, CollatedSamples):  # its rows may view the batch: keep copies
            columns = [np.array(p) if isinstance(p, np.ndarray) else p for p in part.columns]
            part = [tuple(column[k] for column in columns) for k in range(len(at))]
        for k, sample in zip(at, part, strict=True):
            samples[k] = sample
        self._filled.extend(at)

    def result(self) -> Any:
        if self._samples is not None:
            return self._samples
        columns = tuple(self._columns)
        return CollatedSamples(columns, lambda k: tuple(column[k] for column in columns))

    def _new_column(self, piece: Any) -> Any:
        if isinstance(piece, np.ndarray):
            return self._allocate((self.size, *piece.shape[1:]), piece.dtype)
        return [None] * self.size

    def _fits(self, part: CollatedSamples) -> bool:
        if self._filled and len(part.columns) != len(self._columns):
            return False
        for k, piece in enumerate(part.columns):
            column = self._columns[k] if k < len(self._columns) else None
            if column is None:
                continue
            if isinstance(piece, np.ndarray) != isinstance(column, np.ndarray):
                return False
            if isinstance(piece, np.ndarray) and not _array_like(column, piece.shape, piece.dtype):
                return False
        return True

    def _as_samples(self) -> list[Any]:
        """From here on the batch is a list of samples (the places filled so far included)."""
        if self._samples is None:
            self._samples = [None] * self.size
            for k in self._filled:
                self._samples[k] = tuple(_copied(column[k]) for column in self._columns)
        return self._samples


def _array_like(column: Any, shape: tuple[int, ...], dtype: Any) -> bool:
    return (
        isinstance(column, np.ndarray)
        and column.shape[1:] == tuple(shape[1:])
        and column.dtype == np.dtype(dtype)
    )


def _place(column: Any, at: list[int], piece: Any) -> None:
    """Put ``piece`` at rows ``at`` of ``column`` (nothing to do if it is there already)."""
    if isinstance(column, np.ndarray):
        consecutive = at[-1] - at[0] + 1 == len(at)
        if consecutive:
            target = column[at[0] : at[-1] + 1]
            if not (piece.size and np.shares_memory(piece, target)):
                target[...] = piece
        else:
            column[at] = piece
    else:
        for k, value in zip(at, piece, strict=True):
            column[k] = value


def _copied(value: Any) -> Any:
    return np.array(value) if isinstance(value, np.ndarray) else value
