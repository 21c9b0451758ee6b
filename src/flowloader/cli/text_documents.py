"""The documents of make-tokens' INPUT, read in chunks, in order, never whole.

Tables (Parquet files, Arrow IPC files, a folder of either, a ``datasets`` ``save_to_disk``
folder) give one column, block by block (row group, record batch): only that column is read.
JSON Lines give one field of each object; any other file gives its lines. Each chunk is a
list of values (texts, or lists of token ids), with where each came from for error messages.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .bench import UsageError

PARQUET = (".parquet", ".parq")
ARROW = (".arrow", ".feather", ".ipc")
JSONL_EXTENSIONS = (".jsonl", ".json")
# Documents per chunk of a line file (a table's chunks are its blocks).
CHUNK = 1024


@dataclass
class Chunk:
    values: list[Any]
    first: int  # the number of the chunk's first document in INPUT, from 0
    source: str  # INPUT, for errors
    unit: str  # what a document is in INPUT ("row", "document"), for errors

    def name(self, k: int) -> str:
        """Where the chunk's ``k``-th value comes from, for an error."""
        return f"{self.source}: {self.unit} {self.first + k}"


def is_jsonl(path: str) -> bool:
    """JSON Lines by the file's extension; anything else is read as text."""
    return os.path.splitext(path)[1].lower() in JSONL_EXTENSIONS


def table_kind(source: str) -> str | None:
    """ "parquet" or "arrow" when ``source`` is a table (a file by its extension, or a folder
    holding such files or a save_to_disk state.json); None for a file of lines."""
    if os.path.isdir(source):
        if os.path.exists(os.path.join(source, "state.json")):
            return "arrow"
        found = None  # one walk of the tree: Parquet wherever there is any, else Arrow
        for path in glob.iglob(os.path.join(source, "**", "*"), recursive=True):
            if path.endswith(PARQUET):
                return "parquet"
            if path.endswith(ARROW):
                found = "arrow"
        if found is None:
            raise UsageError(f"{source}: a folder without Parquet or Arrow files")
        return found
    extension = os.path.splitext(source)[1].lower()
    if extension in PARQUET:
        return "parquet"
    return "arrow" if extension in ARROW else None


def open_table(source: str, kind: str, column: str) -> Any:
    """The table at ``source`` with ``column`` alone selected; UsageError naming the columns
    there are when it has no such column."""
    try:
        from flowloader.tables import ArrowDataset, ParquetDataset
    except ImportError as error:
        raise UsageError(f"{source}: {error}") from None
    opener = ParquetDataset if kind == "parquet" else ArrowDataset
    try:
        return opener(source, [column])
    except (ValueError, FileNotFoundError) as error:
        raise UsageError(str(error)) from None


def table_chunks(table: Any, source: str, column: str) -> Iterator[Chunk]:
    """One chunk per block of ``table`` (opened by :func:`open_table`)."""
    first = 0
    for block, rows in enumerate(table.block_sizes()):
        yield Chunk(table.read_block(block).column(column).to_pylist(), first, source, "row")
        first += rows


class TextLines:
    """Chunks of the texts of a file's non-blank lines: a JSON Lines file's string ``field``
    of each object, any other file's lines. Counts the bytes it has read, for the progress."""

    def __init__(self, path: str, field: str) -> None:
        self.path, self.field = path, field
        self.bytes_read = 0

    def __iter__(self) -> Iterator[Chunk]:
        jsonl = is_jsonl(self.path)
        values: list[Any] = []
        first = 0
        with open(self.path, "rb") as stream:
            for number, line in enumerate(stream, start=1):
                self.bytes_read += len(line)
                if not line.strip():
                    continue
                if jsonl:
                    values.append(self._text(line, f"{self.path}:{number}"))
                else:
                    values.append(line.rstrip(b"\r\n").decode("utf-8", "replace"))
                if len(values) == CHUNK:
                    yield Chunk(values, first, self.path, "document")
                    first, values = first + len(values), []
        if values:
            yield Chunk(values, first, self.path, "document")

    def _text(self, line: bytes, where: str) -> str:
        try:
            value = json.loads(line)
        except ValueError:
            raise ValueError(f"{where}: not JSON: {quote(line)}") from None
        if not isinstance(value, dict) or self.field not in value:
            fields = f" (its fields: {sorted(value)[:8]})" if isinstance(value, dict) else ""
            raise ValueError(
                f"{where}: expected an object with a {self.field!r} text field{fields}; "
                "see --column"
            )
        text = value[self.field]
        if not isinstance(text, str):
            raise ValueError(f"{where}: {self.field!r} is {type(text).__name__}, not text")
        return text


def quote(line: bytes | str, limit: int = 60) -> str:
    text = line.strip().decode("utf-8", "replace") if isinstance(line, bytes) else line.strip()
    return repr(text if len(text) <= limit else text[:limit] + "...")
