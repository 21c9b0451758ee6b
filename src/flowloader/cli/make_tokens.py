"""Documents into a token file: ``flowloader make-tokens INPUT OUTPUT``.

INPUT is streamed, never read whole. Without ``--tokenizer`` its documents are token ids: a
``.jsonl`` or ``.json`` file as JSON Lines (per line a list of ids, or an object holding the
list under a field), a Parquet or Arrow table's list column, any other file as text (per line
whitespace-separated ids). With ``--tokenizer`` they are texts (a table's or JSON Lines'
column, or a text file's lines), tokenized in worker processes. Blank lines are skipped. The
documents go to :func:`flowloader.text.write_tokens` in INPUT's order, so a rerun after an
interruption hands it the same documents and it continues from its last record.
"""

from __future__ import annotations

import itertools
import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from flowloader.text import write_tokens

from .bench import UsageError
from .text_documents import (
    Chunk,
    TextLines,
    is_jsonl,
    open_table,
    quote,
    table_chunks,
    table_kind,
)
from .tokenize_text import TextTokenizer, tokenized

if TYPE_CHECKING:
    from flowloader.tables.blocks import BlockTable

# The progress callback runs again after this many more bytes of input.
PROGRESS_BYTES = 1 << 20
# How much of a bad line an error quotes.
QUOTED = 60


@dataclass(frozen=True)
class TokensReport:
    documents: int
    tokens: int
    continued: int  # documents an interrupted run had already written


def read_back(output: str) -> str:
    """The line of Python that reads the token file ``output`` back."""
    return f"flowloader.text.TokenDataset({output!r})"


def input_bytes(path: str) -> int | None:
    """The size of ``path`` when it is a regular file (not a pipe), for the progress total."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def check_paths(source: str, output: str, dtype: str, vocab_size: int | None) -> str | None:
    """UsageError for an unusable INPUT, OUTPUT or --vocab-size, before anything is written;
    INPUT's table kind ("parquet", "arrow"), or None for a file of lines."""
    if not os.path.exists(source):
        raise UsageError(f"{source}: no such file")
    kind = table_kind(source)
    if os.path.isdir(output):
        raise UsageError(f"{output}: is a directory; OUTPUT is the token file to write")
    if os.path.exists(output) and os.path.samefile(source, output):
        raise UsageError(f"{output}: OUTPUT is INPUT itself; choose another name")
    ids = int(np.iinfo(dtype).max) + 1
    if vocab_size is not None and vocab_size > ids:
        wider = ": use --dtype uint32" if dtype == "uint16" else ""
        raise UsageError(f"--vocab-size {vocab_size} does not fit {dtype} ids (< {ids}){wider}")
    return kind


def id_limit(dtype: str, vocab_size: int | None) -> tuple[int, str]:
    """The first token id not allowed, and how an error names that bound."""
    limit = int(np.iinfo(dtype).max) + 1
    if vocab_size is not None and vocab_size < limit:
        return vocab_size, f"--vocab-size {vocab_size} (0..{vocab_size - 1})"
    return limit, f"{dtype} (0..{limit - 1})"


def continued_documents(output: str, dtype: str) -> int:
    """How many documents a rerun keeps: those write_tokens recorded in ``<output>.partial.json``
    before an interruption (it restarts when the dtype differs)."""
    try:
        with open(output + ".partial.json", encoding="utf-8") as stream:
            record = json.load(stream)
    except (OSError, ValueError):
        return 0
    return int(record.get("documents", 0)) if record.get("dtype") == dtype else 0


class TokenLines:
    """The documents of INPUT, one array of token ids per non-blank line, checked against
    ``limit`` (the first id not allowed); counts what it has read for the progress."""

    def __init__(
        self,
        path: str,
        field: str,
        limit: int,
        bound: str,
        progress: Callable[[int, int, int], None] | None = None,
    ) -> None:
        self.path, self.field, self.limit, self.bound = path, field, limit, bound
        self.progress = progress
        self.documents = self.tokens = self.bytes_read = 0

    def __iter__(self) -> Iterator[np.ndarray]:
        parse = self._json if is_jsonl(self.path) else _text
        shown = 0
        with open(self.path, "rb") as stream:
            for number, line in enumerate(stream, start=1):
                self.bytes_read += len(line)
                if not line.strip():
                    continue
                try:
                    ids = self._in_range(parse(line))
                except ValueError as error:
                    raise ValueError(f"{self.path}:{number}: {error}") from None
                self.documents += 1
                self.tokens += len(ids)
                if self.progress is not None and self.bytes_read - shown >= PROGRESS_BYTES:
                    self.progress(self.bytes_read, self.documents, self.tokens)
                    shown = self.bytes_read
                yield ids
        if self.progress is not None:
            self.progress(self.bytes_read, self.documents, self.tokens)

    def _json(self, line: bytes) -> np.ndarray:
        try:
            value = json.loads(line)
        except ValueError:
            raise ValueError(f"not JSON: {quote(line)}") from None
        if isinstance(value, dict):
            if self.field not in value:
                raise ValueError(f"the object has no {self.field!r} field (see --field)")
            value = value[self.field]
        ids = np.asarray(value) if isinstance(value, list) else np.empty((0, 0))
        if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
            raise ValueError(
                f"expected a list of integer token ids, or an object with one under "
                f"{self.field!r}: {quote(line)}"
            )
        return ids

    def _in_range(self, ids: np.ndarray) -> np.ndarray:
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= self.limit):
            bad = int(ids[(ids < 0) | (ids >= self.limit)][0])
            raise ValueError(f"token id {bad} is outside {self.bound}")
        return ids


def _text(line: bytes) -> np.ndarray:
    try:
        return np.array(line.split(), dtype=np.int64)
    except (ValueError, OverflowError):
        raise ValueError(
            f"expected whitespace-separated integer token ids: {quote(line)}"
        ) from None


class Counted:
    """Documents from chunks of (documents read so far, lengths, ids), counted; calls
    ``progress(units read, documents, tokens)`` after each chunk, units read being what
    ``read()`` says (a table's rows, a file's bytes)."""

    def __init__(
        self,
        progress: Callable[[int, int, int], None] | None,
        read: Callable[[], int] | None = None,
    ) -> None:
        self.progress, self.read = progress, read
        self.documents = self.tokens = 0

    def through(self, chunks: Iterable[tuple[int, np.ndarray, np.ndarray]]) -> Iterator[np.ndarray]:
        for rows_read, lengths, ids in chunks:
            cuts = np.cumsum(lengths)
            yield from np.split(ids, cuts[:-1])
            self.documents += len(lengths)
            self.tokens += int(cuts[-1]) if len(cuts) else 0
            if self.progress is not None:
                units = self.read() if self.read is not None else rows_read
                self.progress(units, self.documents, self.tokens)


def tokenizer_vocab(tokenizer: TextTokenizer, dtype: str, vocab_size: int | None) -> int:
    """The ids' bound: the tokenizer's vocabulary (or a smaller --vocab-size); UsageError when
    its ids do not fit ``dtype``."""
    limit = int(np.iinfo(dtype).max) + 1
    if tokenizer.vocab_size > limit:
        raise UsageError(
            f"{tokenizer.path} has {tokenizer.vocab_size:,} tokens, more than {dtype} ids hold "
            f"(< {limit:,}): use --dtype uint32"
        )
    return min(tokenizer.vocab_size, vocab_size or tokenizer.vocab_size)


def table_ids(
    table: BlockTable, source: str, column: str, limit: int, bound: str
) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(rows read, lengths, ids) per block of a table's list column of token ids; ValueError
    naming the row of a null, a value that is not a list of integers, or an id out of range."""
    import pyarrow as pa

    first = 0
    for block, rows in enumerate(table.block_sizes()):
        values = table.read_block(block).column(column).combine_chunks()
        if not (pa.types.is_list(values.type) or pa.types.is_large_list(values.type)) or not (
            pa.types.is_integer(values.type.value_type)
        ):
            raise ValueError(
                f"{source}: column {column!r} is {values.type}, not lists of token ids"
            )
        if values.null_count:
            row = first + int(np.flatnonzero(values.is_null().to_numpy(zero_copy_only=False))[0])
            raise ValueError(f"{source}: row {row}: {column!r} is null")
        offsets = values.offsets.to_numpy()
        ids = values.flatten().to_numpy()
        bad = np.flatnonzero((ids < 0) | (ids >= limit))
        if bad.size:
            row = first + int(np.searchsorted(offsets - offsets[0], bad[0], side="right")) - 1
            raise ValueError(f"{source}: row {row}: token id {ids[bad[0]]} is outside {bound}")
        first += rows
        yield first, np.diff(offsets), ids


def progress_total(
    source: str, column: str | None, tokenizer: str | None
) -> tuple[int | None, str]:
    """What the progress of reading ``source`` counts up to, and in what: a table's rows, a
    file's bytes."""
    kind = table_kind(source) if os.path.exists(source) else None
    if kind is None:
        return input_bytes(source), "bytes"
    return len(open_table(source, kind, column or default_column(tokenizer))), "rows"


def default_column(tokenizer: str | None) -> str:
    """The column (or JSON field) documents are in when --column is not given."""
    return "tokens" if tokenizer is None else "text"


def make_tokens(
    source: str,
    output: str,
    dtype: str = "uint16",
    vocab_size: int | None = None,
    column: str | None = None,
    progress: Callable[[int, int, int], None] | None = None,
    overwrite: bool = False,
    tokenizer: str | None = None,
    workers: int = 1,
    eos: str | None = None,
) -> TokensReport:
    """Write the documents of ``source`` to the token file ``output``; resumable.
    Without ``tokenizer`` they are token-id lists (lines, or a table's list ``column``); with
    it, texts (a table's or JSON Lines' ``column``, or lines) tokenized in ``workers``
    processes, ``eos`` (a token of the tokenizer) after each. ``progress(units read,
    documents, tokens)`` is called as INPUT is read; a finished ``output`` is replaced only
    with ``overwrite``."""
    kind = check_paths(source, output, dtype, vocab_size)
    column = column or default_column(tokenizer)
    if eos is not None and tokenizer is None:
        raise UsageError("--eos appends a token of --tokenizer: give the tokenizer too")
    counted: Counted | TokenLines
    if tokenizer is None and kind is None:
        counted = TokenLines(source, column, *id_limit(dtype, vocab_size), progress)
        documents = iter(counted)
    elif tokenizer is None:
        counted = Counted(progress)
        table = open_table(source, kind or "", column)
        documents = counted.through(table_ids(table, source, column, *id_limit(dtype, vocab_size)))
    else:
        text = TextTokenizer(tokenizer, eos)
        vocab_size = tokenizer_vocab(text, dtype, vocab_size)
        chunks: Iterable[Chunk]
        if kind is None:
            chunks = lines = TextLines(source, column)
            counted = Counted(progress, lambda: lines.bytes_read)
        else:
            chunks = table_chunks(open_table(source, kind, column), source, column)
            counted = Counted(progress)
        read = (
            (chunk.first + len(chunk.values), lengths, ids)
            for chunk, lengths, ids in tokenized(chunks, text, column, workers)
        )
        documents = counted.through(read)
    first = next(documents, None)  # before write_tokens, so that an empty INPUT leaves no file
    if first is None:
        raise UsageError(f"{source}: no documents (the file is empty or only blank lines)")
    continued = continued_documents(output, dtype)
    os.makedirs(os.path.dirname(output) or ".", exist_ok=True)
    write_tokens(
        itertools.chain([first], documents),
        output,
        dtype=dtype,
        vocab_size=vocab_size,
        overwrite=overwrite,
    )
    return TokensReport(counted.documents, counted.tokens, continued)
