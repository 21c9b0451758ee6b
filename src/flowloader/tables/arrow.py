"""ArrowDataset: the rows of Arrow IPC files, memory-mapped.

Both IPC formats are read: the file format (``.arrow``/``.feather`` with a footer) and the
stream format, which Hugging Face ``datasets`` writes; a ``save_to_disk`` folder is read as
it is (its ``state.json`` gives the files' order), without importing ``datasets``. Each
record batch is a block. The files are mapped, not read: a row's numeric and fixed-size
values are views of the map (read-only), and the pages the OS reads are shared by every
worker on the machine. Maps are opened in each process on first use (a dataset travels to
workers without them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from ..order import file_digest
from .blocks import DEFAULT_CACHE_BYTES, BlockTable, item_column, selected_columns

_SUFFIXES = (".arrow", ".feather", ".ipc")


class ArrowDataset(BlockTable):
    """Row ``i`` of the Arrow IPC files at ``path`` (a file, a list of files, a folder of
    ``*.arrow`` files, or a ``datasets`` ``save_to_disk`` folder), as a dict of the
    ``columns`` selected (all by default; one name: that column's values); values as
    :class:`ParquetDataset` gives them.
    ``cache_bytes`` bounds the blocks each worker keeps converted to NumPy (numbers without
    nulls and fixed-size lists stay views of the map)."""

    _writable_blocks = False  # views of the map: read-only, shared by every worker
    _join_when_whole = False  # joining would copy the shared map into every worker
    _unit = "record batches"

    def __init__(
        self,
        path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
        columns: str | Sequence[str] | None = None,
        *,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self.paths = _arrow_files(path)
        self.cache_bytes = int(cache_bytes)
        counts: list[int] = []
        self._file_rows: list[int] = []
        schema: pa.Schema | None = None
        for file in self.paths:
            file_schema, sizes = _layout(file)
            if schema is None:
                schema = file_schema
            elif not file_schema.equals(schema):
                raise ValueError(
                    f"{file}: its schema differs from the first file's ({self.paths[0]}): "
                    f"{file_schema} against {schema}"
                )
            counts += sizes
            self._file_rows.append(sum(sizes))
        assert schema is not None
        self.columns = selected_columns(columns, schema, self.paths[0])
        self.item_column = item_column(columns)
        self.schema = pa.schema([schema.field(name) for name in self.columns])
        self._block_starts = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
        self._batches: list[pa.RecordBatch] | None = None
        self._signatures: list[str] | None = None
        self._setup_cache()

    @property
    def column_names(self) -> list[str]:
        return list(self.columns)

    def file_names(self) -> list[str]:
        return [os.path.basename(path) for path in self.paths]

    def file_rows(self) -> list[int]:
        return list(self._file_rows)

    def file_signatures(self) -> list[str]:
        """A digest of each file's size and its first and last 64 KiB (the schema, the
        first batches, the footer), made once: cheap, and a file rewritten with other rows
        mostly changes them (one that keeps its size and both ends is not noticed)."""
        if self._signatures is None:
            self._signatures = [file_digest(path) for path in self.paths]
        return self._signatures

    def _read_block(self, block: int) -> pa.Table:
        if self._batches is None:
            self._batches = [b for path in self.paths for b in _mapped_batches(path)]
        return pa.Table.from_batches([self._batches[block].select(self.columns)])

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "_batches": None}

    def __repr__(self) -> str:
        return (
            f"ArrowDataset({len(self)} rows in {len(self.paths)} files, "
            f"{len(self._block_starts) - 1} record batches, columns {self.columns})"
        )


def _arrow_files(path: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[str]:
    """The IPC files ``path`` names, in order: a save_to_disk folder's from its state.json."""
    if not isinstance(path, (str, os.PathLike)):
        files = [os.fspath(p) for p in path]
        if not files:
            raise ValueError("ArrowDataset got an empty list of files")
        for file in files:
            if not os.path.isfile(file):
                raise FileNotFoundError(f"{file}: no such file")
        return files
    text = os.fspath(path)
    if os.path.isfile(text):
        return [text]
    if not os.path.isdir(text):
        raise FileNotFoundError(f"{text}: no such file or folder")
    if os.path.exists(os.path.join(text, "dataset_dict.json")):
        splits = sorted(e for e in os.listdir(text) if os.path.isdir(os.path.join(text, e)))
        raise ValueError(
            f"{text} is a DatasetDict (splits {splits}): pass one split's folder, such as "
            f"{os.path.join(text, splits[0]) if splits else text + '/train'}"
        )
    state = os.path.join(text, "state.json")
    if os.path.exists(state):
        with open(state, encoding="utf-8") as stream:
            data_files = json.load(stream).get("_data_files", [])
        files = [os.path.join(text, entry["filename"]) for entry in data_files]
    else:
        files = sorted(os.path.join(text, e) for e in os.listdir(text) if e.endswith(_SUFFIXES))
    if not files:
        raise FileNotFoundError(f"{text}: no Arrow files (*.arrow) there")
    return files


def _layout(path: str) -> tuple[pa.Schema, list[int]]:
    """The schema and the rows of each record batch (read through the map: no copy)."""
    batches = _mapped_batches(path)
    if not batches:
        return _open(path, pa.memory_map(path))[0], []
    return batches[0].schema, [batch.num_rows for batch in batches]


def _mapped_batches(path: str) -> list[pa.RecordBatch]:
    """The file's record batches, viewing its memory map."""
    return _open(path, pa.memory_map(path))[1]


def _open(path: str, source: pa.MemoryMappedFile) -> tuple[pa.Schema, list[pa.RecordBatch]]:
    """Read an IPC file in the file format, else the stream format; ValueError naming the
    file when it is neither (or truncated)."""
    try:
        reader = pa.ipc.open_file(source)
        return reader.schema, [reader.get_batch(i) for i in range(reader.num_record_batches)]
    except pa.ArrowInvalid:
        source.seek(0)
    try:
        stream = pa.ipc.open_stream(source)
        return stream.schema, list(stream)
    except pa.ArrowInvalid as error:
        source.close()
        raise ValueError(
            f"{path} is not a readable Arrow IPC file (file or stream format): {error}"
        ) from error
