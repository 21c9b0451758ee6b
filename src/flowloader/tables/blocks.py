"""What every table dataset shares: rows stored in blocks (Parquet row groups, Arrow record
batches), each converted once to NumPy columns and kept in a cache bounded in bytes, a
batch's rows gathered from the blocks it touches and returned in the order asked.

Each process (worker) has its own cache: a dataset travels to workers without it. Threads
share one, behind a lock.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

from .._warn import warn_at_user
from ..dataset import Dataset
from ..order import Read, files_changed
from . import values

DEFAULT_CACHE_BYTES = 256 << 20
# A block that could not be read fails again at once for this long before it is read again.
FAILED_BLOCK_WAIT_S = 30.0
_NOT_PICKLED = (
    "_lock",
    "_cache",
    "_charges",
    "_cached_bytes",
    "decoded_blocks",
    "_evictions",
    "_rows_asked",
    "_warned",
    "_whole",
    "_failed",
)


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
                [np.asarray(c.to_numpy(), dtype=np.int64) for c in counts]
            )
        return self._lengths

    def __getitem__(self, index: int) -> Any:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> Sequence[Any]:
        """The rows at ``indices``, in that order; each block they touch read once."""
        positions = values.positions(indices, len(self))
        if not positions.size:
            return []
        self._rows_asked += positions.size  # unlocked: a count for a warning, not exact
        whole = self._whole
        if whole is not None:  # the table fits the cache: one gather per column
            part = values.rows_of(positions)
            gathered = {name: column[part] for name, column in whole.items()}
            return values.items(gathered, self.item_column)
        blocks = np.searchsorted(self._block_starts, positions, side="right") - 1
        touched, which = np.unique(blocks, return_inverse=True)
        columns = [self._columns(block) for block in touched.tolist()]
        local = positions - self._block_starts[blocks]
        gathered = values.gather(columns, which.reshape(-1), local)
        return values.items(gathered, self.item_column)

    # -- the cache ------------------------------------------------------------------------

    def _setup_cache(self) -> None:
        self._lock = threading.Lock()
        self._cache: OrderedDict[int, values.Columns] = OrderedDict()
        self._charges: dict[int, int] = {}  # block -> the bytes it is counted for
        self._cached_bytes = 0
        self.decoded_blocks = 0  # blocks read and converted by this process (cache misses)
        self._evictions = 0
        self._rows_asked = 0  # rows asked of this process (what reading them should cost)
        self._warned = False
        self._whole: values.Columns | None = None
        self._failed: dict[int, tuple[OSError, float]] = {}  # unreadable blocks: error, when

    def _columns(self, block: int) -> values.Columns:
        """Block ``block``'s selected columns as NumPy, from the cache or read."""
        with self._lock:
            if self._whole is not None:
                return values.block_of(self._whole, self._block_starts, block)
            found = self._cache.get(block)
            if found is not None:
                self._cache.move_to_end(block)
                return found
            failed = self._failed.get(block)
        if failed is not None and time.monotonic() - failed[1] < FAILED_BLOCK_WAIT_S:
            raise _again(failed[0])
        try:
            table = self._read_block(block)
        except OSError as error:
            # Unreadable after its tries: ``skip_errors`` then asks for the block again for
            # each of a batch's rows in it; for a while they fail at once, not after a read
            # (and a remote file's retries) each. Later it is read again (an outage passes).
            with self._lock:
                self._failed[block] = (error, time.monotonic())
            raise
        columns = values.numpy_columns(table, writable=self._writable_blocks)
        # What the block holds, counted high: Arrow's buffers (the strings' bytes among
        # them) and the NumPy arrays (the object arrays' pointers; views counted twice).
        charge = table.nbytes + values.nbytes(columns)
        with self._lock:
            self._cache[block] = columns
            self._charges[block] = charge
            self._cached_bytes += charge
            self.decoded_blocks += 1
            while self._cached_bytes > self.cache_bytes and len(self._cache) > 1:
                dropped, _ = self._cache.popitem(last=False)
                self._cached_bytes -= self._charges.pop(dropped)
                self._evictions += 1
            # Thrashing: more block reads than twice what the rows asked need, block by block
            # (a locality-keeping order over a table bigger than the cache reads each block
            # about once per pass, whatever the number of passes).
            blocks = len(self._block_starts) - 1
            needed = self._rows_asked * blocks / max(len(self), 1)
            thrashing = (
                self._evictions > 2 * blocks + 8
                and self.decoded_blocks > 2 * needed + len(self._cache) + 8
            )
            warn, self._warned = thrashing and not self._warned, self._warned or thrashing
            everything = len(self._cache) == blocks
            if everything and self._join_when_whole and self._whole is None:
                # A shuffled batch touches ~every block: gathering from each costs more
                # than the rows. The joined arrays replace the blocks (about the same bytes).
                ordered = [self._cache[b] for b in range(len(self._cache))]
                self._whole = {name: values.joined([c[name] for c in ordered]) for name in columns}
                self._cache.clear()
        if warn:
            warn_at_user(
                f"{type(self).__name__}: {self.decoded_blocks} block reads for a table of "
                f"{len(self._block_starts) - 1} blocks in this process: the order jumps "
                f"between blocks that the cache ({self.cache_bytes >> 20} MiB) cannot keep, "
                "so each is read again for a few rows. flowloader.BlockShuffleSampler reads "
                "each about once per epoch; or raise cache_bytes.",
                RuntimeWarning,
            )
        return columns

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in _NOT_PICKLED}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._setup_cache()

    # -- the resume contract (docs/design/resume.md) --------------------------------------

    def order_state(self) -> dict[str, Any]:
        """The files and their row counts, so that a resume notices a changed table."""
        return {
            "format": f"flowloader.tables.{type(self).__name__}",
            "files": self.file_names(),
            "rows": self.file_rows(),
        }

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
        )


def _is_list(kind: pa.DataType) -> bool:
    return bool(pt.is_list(kind) or pt.is_large_list(kind) or pt.is_fixed_size_list(kind))


def _again(error: OSError) -> OSError:
    """A fresh copy of a block's read error, to raise again (one exception object raised
    in several places, or threads, would pile up tracebacks)."""
    again = OSError(*error.args)
    again.__cause__ = error.__cause__
    return again
