"""Tokenized documents into a token file: ``flowloader make-tokens INPUT OUTPUT``.

INPUT is read line by line, never whole: a ``.jsonl`` or ``.json`` file as JSON Lines (per
line a list of token ids, or an object holding the list under a field), any other file as
text (per line whitespace-separated ids). Blank lines are skipped. The documents go to
:func:`flowloader.text.write_tokens` in the file's order, so a rerun after an interruption
hands it the same documents and it continues from its last record.
"""

from __future__ import annotations

import itertools
import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from flowloader.text import write_tokens

from .bench import UsageError

JSONL_EXTENSIONS = (".jsonl", ".json")
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


def is_jsonl(path: str) -> bool:
    """JSON Lines by the file's extension; anything else is read as text."""
    return os.path.splitext(path)[1].lower() in JSONL_EXTENSIONS


def input_bytes(path: str) -> int | None:
    """The size of ``path`` when it is a regular file (not a pipe), for the progress total."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def check_paths(source: str, output: str, dtype: str, vocab_size: int | None) -> None:
    """UsageError for an unusable INPUT, OUTPUT or --vocab-size, before anything is written."""
    if not os.path.exists(source):
        raise UsageError(f"{source}: no such file")
    if os.path.isdir(source):
        raise UsageError(f"{source}: is a directory, not a file of documents")
    if os.path.isdir(output):
        raise UsageError(f"{output}: is a directory; OUTPUT is the token file to write")
    if os.path.exists(output) and os.path.samefile(source, output):
        raise UsageError(f"{output}: OUTPUT is INPUT itself; choose another name")
    ids = int(np.iinfo(dtype).max) + 1
    if vocab_size is not None and vocab_size > ids:
        wider = ": use --dtype uint32" if dtype == "uint16" else ""
        raise UsageError(f"--vocab-size {vocab_size} does not fit {dtype} ids (< {ids}){wider}")


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
            raise ValueError(f"not JSON: {_quote(line)}") from None
        if isinstance(value, dict):
            if self.field not in value:
                raise ValueError(f"the object has no {self.field!r} field (see --field)")
            value = value[self.field]
        ids = np.asarray(value) if isinstance(value, list) else np.empty((0, 0))
        if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
            raise ValueError(
                f"expected a list of integer token ids, or an object with one under "
                f"{self.field!r}: {_quote(line)}"
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
            f"expected whitespace-separated integer token ids: {_quote(line)}"
        ) from None


def _quote(line: bytes) -> str:
    text = line.strip().decode("utf-8", "replace")
    return repr(text if len(text) <= QUOTED else text[:QUOTED] + "...")


def make_tokens(
    source: str,
    output: str,
    dtype: str = "uint16",
    vocab_size: int | None = None,
    field: str = "tokens",
    progress: Callable[[int, int, int], None] | None = None,
    overwrite: bool = False,
) -> TokensReport:
    """Write the documents of ``source`` to the token file ``output``; resumable.
    ``progress(bytes read, documents, tokens)`` is called as INPUT is read; a finished
    ``output`` is replaced only with ``overwrite``."""
    check_paths(source, output, dtype, vocab_size)
    lines = TokenLines(source, field, *id_limit(dtype, vocab_size), progress)
    documents = iter(lines)
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
    return TokensReport(lines.documents, lines.tokens, continued)
