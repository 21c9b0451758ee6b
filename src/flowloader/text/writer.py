"""write_tokens: already-tokenized documents into a flat token file and its index.

Resumable: the file grows as ``<path>.partial`` with its offsets in ``<path>.partial.offsets``,
and ``<path>.partial.json`` records how many documents are safely on disk. Run again on the
same documents after an interruption, it cuts both files back to that record, passes over the
documents already written and goes on; the token file and its index take their final names
only when complete.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from . import index as _index

# Documents written between two records of the progress.
RECORD_EVERY = 4096


def write_tokens(
    documents: Iterable[Sequence[int] | np.ndarray],
    path: str | os.PathLike,
    *,
    dtype: Any = "uint16",
    vocab_size: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    overwrite: bool = False,
) -> str:
    """Write ``documents`` (sequences of token ids) to the token file ``path`` and its index
    (``<path>.idx.npy`` / ``.json``), for :class:`TokenDataset`. Ids must fit ``dtype``
    (``uint16`` or ``uint32``) and lie below ``vocab_size`` when it is given; the error names
    the document. ``progress(documents, tokens)`` is called as they are written. A finished
    token file (with its index) at ``path`` is refused unless ``overwrite=True``. Returns the
    path."""
    path = os.fspath(path)
    name = _index.checked_dtype(dtype, path)
    finished = _index.sidecar(path) + ".json"
    if not overwrite and os.path.exists(path) and os.path.exists(finished):
        raise FileExistsError(
            f"{path} is already a finished token file (its index {finished} is there): pass "
            "overwrite=True to replace it"
        )
    limit = min(np.iinfo(name).max + 1, vocab_size if vocab_size is not None else 1 << 62)
    partial = path + ".partial"
    done, tokens = _resume(partial, name)
    remaining = iter(documents)
    _pass_over(remaining, done, tokens, partial)
    written = done
    with open(partial, "ab") as out, open(partial + ".offsets", "ab") as offsets:
        for number, document in enumerate(remaining, start=done):
            ids = _checked(document, limit, name, number, vocab_size, path)
            out.write(ids.tobytes())
            tokens += len(ids)
            offsets.write(np.int64(tokens).tobytes())
            written = number + 1
            if written % RECORD_EVERY == 0:
                _record(partial, out, offsets, written, tokens, name)
                if progress is not None:
                    progress(written, tokens)
        _record(partial, out, offsets, written, tokens, name)
    if written == 0:
        _remove(partial, partial + ".offsets", partial + ".json")
        raise ValueError(f"no documents to write to {path}")
    if progress is not None:
        progress(written, tokens)
    cuts = np.fromfile(partial + ".offsets", dtype=np.int64)
    os.replace(partial, path)
    _index.write_index(_index.sidecar(path), name, cuts, path)
    _remove(partial + ".offsets", partial + ".json")
    return path


def _checked(
    document: Any, limit: int, dtype: str, number: int, vocab_size: int | None, path: str
) -> np.ndarray:
    ids = np.asarray(document)
    if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
        raise ValueError(f"{path}: document {number} is not a list of integer token ids")
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= limit):
        bad = int(ids[(ids < 0) | (ids >= limit)][0])
        bound = (
            f"vocab_size={vocab_size}" if vocab_size is not None and vocab_size <= limit else dtype
        )
        raise ValueError(f"{path}: document {number} has token id {bad}, outside {bound}")
    return ids.astype(dtype, copy=False)


def _pass_over(documents: Iterator[Any], count: int, tokens: int, partial: str) -> None:
    """Pass over the ``count`` documents an interrupted run wrote (``tokens`` tokens in all):
    documents of other lengths mean other documents, which would mix two corpora."""
    seen = sum(len(document) for document in itertools.islice(documents, count))
    if seen != tokens:
        raise ValueError(
            f"the documents differ from those of the interrupted run that left {partial}: its "
            f"first {count} documents had {tokens} tokens, these have {seen}; delete "
            f"{partial}* to start again"
        )


def _resume(partial: str, dtype: str) -> tuple[int, int]:
    """(documents, tokens) already safely written by an interrupted run, its files cut back
    to them; (0, 0), with fresh files, when there is nothing to continue."""
    try:
        with open(partial + ".json", encoding="utf-8") as stream:
            record = json.load(stream)
    except (FileNotFoundError, ValueError):
        record = None
    if record is None or record.get("dtype") != dtype or not os.path.exists(partial):
        _remove(partial, partial + ".offsets", partial + ".json")
        with open(partial + ".offsets", "wb") as offsets:
            offsets.write(np.int64(0).tobytes())
        return 0, 0
    done, tokens = int(record["documents"]), int(record["tokens"])
    os.truncate(partial, tokens * np.dtype(dtype).itemsize)
    os.truncate(partial + ".offsets", (done + 1) * 8)
    return done, tokens


def _record(partial: str, out: Any, offsets: Any, documents: int, tokens: int, dtype: str) -> None:
    """Make what is written so far survive a crash, then say so."""
    for stream in (out, offsets):
        stream.flush()
        os.fsync(stream.fileno())
    with open(partial + ".json.tmp", "w", encoding="utf-8") as record:
        json.dump({"documents": documents, "tokens": tokens, "dtype": dtype}, record)
    os.replace(partial + ".json.tmp", partial + ".json")


def _remove(*paths: str) -> None:
    for p in paths:
        if os.path.exists(p):
            os.remove(p)
