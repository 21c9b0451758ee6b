"""What every table dataset shares: rows stored in blocks (Parquet row groups, Arrow record
batches), each converted once to NumPy columns and kept in a cache bounded in bytes, a
batch's rows gathered from the blocks it touches and returned in the order asked.

Each process (worker) has its own cache (:mod:`.cache`): a dataset travels to worker
processes without it; thread workers' copies share their table's, behind one lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

from ..dataset import Dataset
from ..order import Read, files_changed
from . import reads, values
from .cache import BlockCache

DEFAULT_CACHE_BYTES = 256 << 20
# A block that could not be read fails again at once for this long before it is read again.
FAILED_BLOCK_WAIT_S = 30.0


def selected_columns(
    columns: str | Sequence[str] | None, schema: pa.Schema, where: str
) -> list[str]:
    """The columns to read: all of ``schema``'s, or ``columns`` (a list, or one name) once
    each is seen to be there (a ValueError naming ``where`` and the columns there are, if
    not)."""
    if columns is None:
        return list(schema.names)
    if isinstance(columns, str):
        columns = [columns]
    missing = [name for name in columns if name not in schema.names]
    if missing:
        raise ValueError(f"{where}: no column {missing}; the table's columns are {schema.names}")
    return list(columns)


def item_column(columns: str | Sequence[str] | None) -> str | None:
    """The column whose values are the rows themselves: ``columns`` given as one name (a
    list, even of one name, gives dicts)."""
    return columns if isinstance(columns, str) else None


class BlockTable(Dataset[Any]):
    """A table whose rows are stored in blocks. Subclasses set ``_block_starts`` (the first
    row of each block, then the row count), ``cache_bytes`` and ``item_column``, read a
    block with ``_read_block`` and name their files; then call ``_setup_cache()``."""

    _block_starts: np.ndarray
    cache_bytes: int
    item_column: str | None  # rows are this column's values, not dicts
    schema: pa.Schema  # the selected columns
    _lengths: np.ndarray | None = None  # a list column's row lengths, once counted
    _row_bytes: float | None = None  # what the cache counts a row as, once measured
    _unit = "blocks"  # what the format calls its blocks, for messages
    _writable_blocks = True  # False where blocks view a shared map (ArrowDataset)
    # Join the blocks into one array per column once all are cached; not where they view a
    # map the workers share (joining would copy it into each).
    _join_when_whole = True

    def _read_block(self, block: int) -> pa.Table:
        raise NotImplementedError

    def file_names(self) -> list[str]:
        """The names of the table's files, in order."""
        raise NotImplementedError

    def file_rows(self) -> list[int]:
        """Rows per file, in order."""
        raise NotImplementedError

    def file_signatures(self) -> list[str] | None:
        """A short digest per file of what it holds, where the format gives one cheaply
        (None: files are compared by name and rows only)."""
        return None

    def __len__(self) -> int:
        return int(self._block_starts[-1])

    def block_sizes(self) -> list[int]:
        """Rows per block, in order (the blocks :class:`flowloader.BlockShuffleSampler`
        keeps together)."""
        return np.diff(self._block_starts).tolist()

    def read_block(self, block: int) -> pa.Table:
        """Block ``block``'s selected columns as Arrow, read now and not cached: for one pass
        over the whole table (``flowloader make-tokens`` reads a text column so)."""
        return self._read_block(block)

    @property
    def lengths(self) -> np.ndarray | None:
        """Each row's number of values, where the rows are a list column's values (token
        documents: :class:`flowloader.text.Packed` plans rows from them without reading a
        row); None otherwise. Counted from the list offsets, block by block, once."""
        if self.item_column is None or not _is_list(self.schema.field(self.item_column).type):
            return None
        if self._lengths is None:
            counts = [
                pc.list_value_length(self._read_block(b).column(self.item_column)).fill_null(0)
                for b in range(len(self._block_starts) - 1)
            ]
            self._lengths = np.concatenate(
                [values.numbers(c.combine_chunks()).astype(np.int64) for c in counts]
            )
        return self._lengths

    def __getitem__(self, index: int) -> Any:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> Sequence[Any]:
        """The rows at ``indices``, in that order; each block they touch read once. A run of
        rows (in sequence, or a BlockShuffleSampler's unshuffled stretch) is a slice of its
        block (views, no copy), or slices of its blocks joined."""
        positions = values.positions(indices, len(self))
        if not positions.size:
            return []
        run = values.run_of(positions)
        whole = self._cache.whole
        if whole is not None:  # the table fits the cache: one gather per column
            part = slice(*run) if run is not None else positions
            gathered = {name: column[part] for name, column in whole.items()}
        elif run is not None:
            gathered = self._rows_in(*run)
        else:
            blocks = np.searchsorted(self._block_starts, positions, side="right") - 1
            order, bounds = values.grouped(blocks)
            columns = [self._columns(block) for block in blocks[order[bounds[:-1]]].tolist()]
            local = positions - self._block_starts[blocks]
            gathered = values.gather(columns, order, bounds, local)
        return values.items(gathered, self.item_column)

    def _rows_in(self, start: int, stop: int) -> values.Columns:
        """Rows ``start`` to ``stop - 1``: slices of the blocks holding them, joined where
        there are several."""
        starts = self._block_starts
        first = int(np.searchsorted(starts, start, side="right")) - 1
        last = int(np.searchsorted(starts, stop - 1, side="right")) - 1
        parts = []
        for block in range(first, last + 1):
            begin = int(starts[block])
            part = slice(max(start, begin) - begin, min(stop, int(starts[block + 1])) - begin)
            parts.append({n: column[part] for n, column in self._columns(block).items()})
        if len(parts) == 1:
            return parts[0]
        return {name: values.joined([p[name] for p in parts]) for name in parts[0]}

    # -- the cache ------------------------------------------------------------------------

    def _setup_cache(self) -> None:
        self._cache = BlockCache(self.cache_bytes, self._block_starts, self._join_when_whole)

    @property
    def decoded_blocks(self) -> int:
        """Blocks read and converted in this process (cache misses), by every thread."""
        return self._cache.decoded

    @property
    def cached_bytes(self) -> int:
        """What the decoded blocks in this process's cache are counted for (at most about
        ``cache_bytes``; one cache per process, shared by thread workers)."""
        return self._cache.bytes

    def cache_warning(self, sampler: Any, batch_size: int | None = None) -> str | None:
        """What the order of ``sampler`` (the loader's sampler or batch sampler, batches of
        ``batch_size``) will cost this table's cache, as a warning to give once, in the main
        process: the expected block reads per epoch and the fix (BlockShuffleSampler, or a
        larger ``cache_bytes``), where the order jumps between more blocks than the cache
        holds; else None. Reads the first block into the cache to size the blocks, where the
        order is a shuffle (:mod:`.reads`): thread workers, which share the cache, do not
        read it again."""
        blocks = len(self._block_starts) - 1
        if blocks < 2:
            return None
        order = reads.order_of(sampler, blocks, len(self) / blocks, batch_size)
        if order is None:
            return None
        if self._row_bytes is None:
            self._columns(0)
            charge = self._cache.charge_of(0)
            if charge is None:  # every block is cached, joined: the cache holds the table
                return None
            self._row_bytes = charge / max(int(self._block_starts[1]), 1)
        block_bytes = self._row_bytes * len(self) / blocks
        what = type(self).__name__
        return reads.message(what, self._unit, order, blocks, block_bytes, self.cache_bytes)

    def _columns(self, block: int) -> values.Columns:
        """Block ``block``'s selected columns as NumPy, from the cache or read."""
        return self._cache.get(block, self._decode, FAILED_BLOCK_WAIT_S)

    def _decode(self, block: int) -> tuple[values.Columns, int]:
        table = self._read_block(block)
        columns = values.numpy_columns(table, writable=self._writable_blocks)
        # What the block holds, counted high: Arrow's buffers (the strings' bytes among
        # them) and the NumPy arrays (the object arrays' pointers; views counted twice).
        return columns, table.nbytes + values.nbytes(columns)

    def __copy__(self) -> BlockTable:
        """A shallow copy sharing this table's cache (a thread worker's copy: one cache per
        process, as one lock guards it); a pickled table starts with an empty cache."""
        copied = type(self).__new__(type(self))
        copied.__dict__.update(self.__dict__)
        return copied

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_cache"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup_cache()

    # -- the resume contract (docs/design/resume.md) --------------------------------------

    def order_state(self) -> dict[str, Any]:
        """The files, their row counts and digests, so that a resume notices a changed
        table (a file rewritten with as many rows included)."""
        state: dict[str, Any] = {
            "format": f"flowloader.tables.{type(self).__name__}",
            "files": self.file_names(),
            "rows": self.file_rows(),
        }
        signatures = self.file_signatures()
        if signatures is not None:
            state["signatures"] = signatures
        return state

    def order_changes(self, saved: dict[str, Any], read: Read) -> list[str]:
        """The files holding rows below the prefix read (every file, without a prefix) must
        be the same files with as many rows; files after it may be added or change."""
        now = self.order_state()
        if not isinstance(saved, dict) or saved.get("format") != now["format"]:
            return [f"the state does not describe a {type(self).__name__}"]
        return files_changed(
            (saved["files"], saved["rows"]),
            (now["files"], now["rows"]),
            read,
            items=lambda rows: rows,
            what="table file",
            unit="rows",
            signatures=(saved.get("signatures"), now.get("signatures")),
        )


def _is_list(kind: pa.DataType) -> bool:
    return bool(pt.is_list(kind) or pt.is_large_list(kind) or pt.is_fixed_size_list(kind))
