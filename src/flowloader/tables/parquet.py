"""ParquetDataset: the rows of Parquet files as a map-style dataset.

Its length and the row-group index come from the files' footers, read once when the dataset
is made (no data read). A batch's rows are read row group by row group: the indices are
grouped by the row group that holds them, each touched row group's selected columns are read
once (column projection: the other columns are neither read nor fetched) and kept in a cache
bounded in bytes, and the rows come back in the order asked. So a sampler that visits row
groups together (``flowloader.BlockShuffleSampler``) decodes each about once per epoch.

Each process (worker) has its own cache: the dataset travels to workers without it. Threads
share one, behind a lock. Files are opened for each row group read with the footer already
parsed, so nothing stays open between reads and a remote footer is fetched once. A remote
table's fetched row groups are also kept on local disk for every worker on the machine
(:mod:`.fetched`), so that N workers fetch each about once, not N times.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .blocks import DEFAULT_CACHE_BYTES, BlockTable, item_column, selected_columns
from .fetched import DEFAULT_LOCAL_BYTES, FetchedBlocks
from .sources import Files, resolve


class ParquetDataset(BlockTable):
    """Row ``i`` of the Parquet files ``source`` names, as a dict of the ``columns`` selected
    (all by default): numbers as NumPy scalars, lists as NumPy arrays, strings as ``str``,
    binary as ``bytes``, nulls as None. ``columns`` as one name (not a list): row ``i`` is
    that column's value, e.g. a token column's array, which :class:`flowloader.text.Packed`
    packs (``lengths`` gives the documents' lengths without reading a row).

    ``source``: a file, a list of files, a folder (its ``*.parquet``, recursively, sorted), a
    glob, or a URL (``s3://``, ``gs://``, ``http(s)://``: through fsspec, with
    ``storage_options``; or pass an fsspec ``filesystem`` for plain paths). ``cache_bytes``
    bounds the decoded row groups each worker keeps. A remote table's fetched row groups are
    shared by the workers through ``local_cache_dir`` (default: a temporary folder removed
    with the dataset), at most ``local_cache_bytes`` of it.
    """

    _unit = "row groups"

    def __init__(
        self,
        source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        columns: str | Sequence[str] | None = None,
        *,
        filesystem: Any = None,
        storage_options: dict[str, Any] | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        local_cache_dir: str | os.PathLike[str] | None = None,
        local_cache_bytes: int = DEFAULT_LOCAL_BYTES,
    ) -> None:
        if int(cache_bytes) < 0:
            raise ValueError(f"cache_bytes should be >= 0, got {cache_bytes}")
        self.files: Files = resolve(source, (".parquet", ".parq"), filesystem, storage_options)
        self.cache_bytes = int(cache_bytes)
        self._footers = [self._footer(path) for path in self.files.paths]
        full = self._footers[0].schema.to_arrow_schema()
        self.columns = selected_columns(columns, full, self.files.name(self.files.paths[0]))
        self.item_column = item_column(columns)
        self.schema = pa.schema([full.field(name) for name in self.columns])
        for path, footer in zip(self.files.paths[1:], self._footers[1:], strict=True):
            _same_schema(self, path, footer.schema.to_arrow_schema())
        sizes = [
            (f, g, footer.row_group(g).num_rows)
            for f, footer in enumerate(self._footers)
            for g in range(footer.num_row_groups)
        ]
        self._group_file = np.array([f for f, _, _ in sizes], dtype=np.int64)
        self._group_in_file = np.array([g for _, g, _ in sizes], dtype=np.int64)
        counts = np.array([n for _, _, n in sizes], dtype=np.int64)
        self._block_starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self._fetched = None
        self._signatures: list[str] | None = None
        if self.files.filesystem is not None:
            folder = None if local_cache_dir is None else os.fspath(local_cache_dir)
            self._fetched = FetchedBlocks(folder, local_cache_bytes, self)
        self._setup_cache()

    @property
    def column_names(self) -> list[str]:
        return list(self.columns)

    def file_rows(self) -> list[int]:
        return [footer.num_rows for footer in self._footers]

    def file_signatures(self) -> list[str]:
        """A digest of each file's footer: its row groups' sizes, offsets and statistics (a
        file rewritten with other rows changes them), made once."""
        if self._signatures is None:
            self._signatures = [
                hashlib.sha1(repr(footer.to_dict()).encode()).hexdigest()[:16]
                for footer in self._footers
            ]
        return self._signatures

    def _read_block(self, group: int) -> pa.Table:
        f, g = int(self._group_file[group]), int(self._group_in_file[group])

        def read(handle: IO[bytes]) -> pa.Table:
            reader = pq.ParquetFile(handle, metadata=self._footers[f])
            return reader.read_row_group(g, columns=self.columns, use_threads=False)

        path = self.files.paths[f]
        if self._fetched is None:
            return self.files.read(path, f"row group {g}", read)
        return self._fetched.get(
            self._block_key(f, g), lambda: self.files.read(path, f"row group {g}", read)
        )

    def _block_key(self, f: int, g: int) -> str:
        """A name for row group ``g`` of file ``f`` with the selected columns, that no other
        file, row group or column selection shares (a local_cache_dir may be reused)."""
        footer = self._footers[f]
        identity = repr(
            (self.files.name(self.files.paths[f]), footer.serialized_size, footer.num_rows)
        )
        digest = hashlib.sha1(f"{identity} {g} {self.columns}".encode()).hexdigest()[:20]
        return f"{digest}-{g}"

    def _footer(self, path: str) -> pq.FileMetaData:
        try:
            # Not a Parquet file (ArrowInvalid) is an answer, not a failure to retry.
            return self.files.read(
                path, "its footer", lambda h: pq.ParquetFile(h).metadata, (pa.ArrowInvalid,)
            )
        except FileNotFoundError:
            raise
        except (pa.ArrowInvalid, OSError) as error:
            if isinstance(error, OSError) and self.files.filesystem is not None:
                raise  # fetching failed after its retries; the error names the URL
            raise ValueError(
                f"{self.files.name(path)} is not a readable Parquet file "
                f"({type(error).__name__}: {error})"
            ) from error

    def file_names(self) -> list[str]:
        return [os.path.basename(path) for path in self.files.paths]

    def __repr__(self) -> str:
        return (
            f"ParquetDataset({len(self)} rows in {len(self.files.paths)} files, "
            f"{len(self._group_file)} row groups, columns {self.columns})"
        )


def _same_schema(dataset: ParquetDataset, path: str, schema: pa.Schema) -> None:
    """Every file has the selected columns with the first file's types."""
    first = dataset.files.name(dataset.files.paths[0])
    for name in dataset.columns:
        if name not in schema.names:
            raise ValueError(
                f"{dataset.files.name(path)} has no column {name!r} (the first file, {first}, "
                f"has it); its columns are {schema.names}"
            )
        kind, expected = schema.field(name).type, dataset.schema.field(name).type
        if kind != expected:
            raise ValueError(
                f"{dataset.files.name(path)}: column {name!r} is {kind}, but {expected} in the "
                f"first file, {first}"
            )
