"""TokenDataset: the documents of flat token files, as read-only views of memory maps."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import order
from ..dataset import Dataset
from . import index as _index


def as_paths(paths: Any) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    listed = [os.fspath(p) for p in paths]
    if not listed:
        raise ValueError("no token file given")
    return listed


class TokenFile:
    """One token file and its index; the memory map opens on first read (and again in each
    process that unpickles it: a map is never pickled)."""

    def __init__(self, path: str, index: _index.TokenIndex) -> None:
        self.path, self.dtype, self.offsets = path, index.dtype, index.offsets
        self._tokens: np.ndarray | None = None

    @property
    def tokens(self) -> np.ndarray:
        if self._tokens is None:
            count = int(self.offsets[-1])
            tokens: np.ndarray = np.empty(0, self.dtype)
            if count:  # a plain array over the map: slicing a memmap subclass costs more
                mapped = np.memmap(self.path, dtype=self.dtype, mode="r", shape=(count,))
                tokens = mapped.view(np.ndarray)
            self._tokens = tokens
        return self._tokens

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_tokens": None}


class TokenDataset(Dataset[np.ndarray]):
    """Map-style over the documents of one or more flat token files (``flowloader.text``).

    ``ds[i]`` is document i's token ids, a read-only view of a memory map (no copy; forked
    workers share the pages). Document boundaries come from the index ``write_tokens`` wrote
    beside each file, from ``doc_index`` (a ``.npy`` of int64 offsets per file), or, given
    only ``eos_id``, from one scan for that id (cached beside the file, or in ``cache_dir``
    when its folder is read-only). ``dtype``: the ids' type (``uint16`` or ``uint32``), needed
    only where no index says it. ``vocab_size``: ids at or above it are an error naming the
    file and document. ``lengths``: every document's length, without reading tokens.
    """

    def __init__(
        self,
        paths: str | os.PathLike | Sequence[str | os.PathLike],
        *,
        dtype: Any = None,
        doc_index: str | Sequence[str] | None = None,
        eos_id: int | None = None,
        vocab_size: int | None = None,
        cache_dir: str | None = None,
    ) -> None:
        files = as_paths(paths)
        indices = as_paths(doc_index) if doc_index is not None else [None] * len(files)
        if len(indices) != len(files):
            raise ValueError(f"{len(indices)} doc_index file(s) for {len(files)} token file(s)")
        self.files = [
            TokenFile(path, _open_index(path, dtype, given, eos_id, cache_dir))
            for path, given in zip(files, indices, strict=True)
        ]
        counts = [len(f.offsets) - 1 for f in self.files]
        self._first_doc = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        if self._first_doc[-1] == 0:
            raise ValueError(f"no document in {', '.join(files)}")
        self.lengths = np.concatenate([np.diff(f.offsets) for f in self.files]).astype(np.int64)
        self.vocab_size = vocab_size
        self._signatures: list[str] | None = None

    @property
    def num_tokens(self) -> int:
        return int(self.lengths.sum())

    def __len__(self) -> int:
        return int(self._first_doc[-1])

    def locate(self, i: int) -> tuple[TokenFile, int]:
        """(the file, the document's number in it) of document ``i``."""
        if not 0 <= i < len(self):
            raise IndexError(f"document {i} is out of range for {len(self)} documents")
        f = int(np.searchsorted(self._first_doc, i, side="right") - 1)
        return self.files[f], i - int(self._first_doc[f])

    def __getitem__(self, i: int) -> np.ndarray:
        return self._document(*self.locate(int(i)))

    def __getitems__(self, indices: Sequence[int]) -> list[np.ndarray]:
        """Many documents at once (a packed row's): located together; reading draws nothing,
        so no sample context is needed."""
        places = np.asarray(indices, dtype=np.int64)
        if places.size and (places.min() < 0 or places.max() >= len(self)):
            bad = int(places[(places < 0) | (places >= len(self))][0])
            raise IndexError(f"document {bad} is out of range for {len(self)} documents")
        files = np.searchsorted(self._first_doc, places, side="right") - 1
        docs = places - self._first_doc[files]
        return [
            self._document(self.files[f], d)
            for f, d in zip(files.tolist(), docs.tolist(), strict=True)
        ]

    # -- the resume contract (docs/design/resume.md) --------------------------------------

    def order_state(self) -> dict[str, Any]:
        """The files, their documents and a digest of each (its size and ends), so that a
        resume notices token files added, removed or rewritten under what was read."""
        if self._signatures is None:
            self._signatures = [order.file_digest(f.path) for f in self.files]
        return {
            "format": "flowloader.text.TokenDataset",
            "files": [os.path.basename(f.path) for f in self.files],
            "documents": np.diff(self._first_doc).tolist(),
            "signatures": self._signatures,
        }

    def order_changes(self, saved: dict[str, Any], read: order.Read) -> list[str]:
        """The files holding documents below the prefix read (every file, without one) must
        be as they were; later files may be added or change."""
        if not isinstance(saved, dict) or saved.get("format") != "flowloader.text.TokenDataset":
            return ["the state does not describe a TokenDataset"]
        now = self.order_state()
        return order.files_changed(
            (saved["files"], saved["documents"]),
            (now["files"], now["documents"]),
            read,
            items=lambda documents: documents,
            what="token file",
            unit="documents",
            signatures=(saved.get("signatures"), now["signatures"]),
        )

    def _document(self, token_file: TokenFile, doc: int) -> np.ndarray:
        start, end = int(token_file.offsets[doc]), int(token_file.offsets[doc + 1])
        tokens = token_file.tokens[start:end]
        if self.vocab_size is not None and len(tokens) and int(tokens.max()) >= self.vocab_size:
            bad = int(np.flatnonzero(tokens >= self.vocab_size)[0])
            raise ValueError(
                f"{token_file.path}: document {doc} has token id {int(tokens[bad])} at position "
                f"{bad}, not below vocab_size={self.vocab_size}"
            )
        return tokens


def _open_index(
    path: str, dtype: Any, given: str | None, eos_id: int | None, cache_dir: str | None
) -> _index.TokenIndex:
    """The document offsets of ``path``: from ``given``, the written sidecar, or a scan."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such token file: {path}")
    if given is not None:
        if dtype is None:
            raise ValueError(
                f"{path}: with doc_index=, say the ids' type: dtype='uint16' or 'uint32'"
            )
        name = _index.checked_dtype(dtype, path)
        offsets = np.load(given, mmap_mode="r")
        _index.check_offsets(path, offsets, _index.token_count(path, name), where=given)
        return _index.TokenIndex(name, offsets)
    written = _index.load(path, _index.sidecar(path), dtype)
    if written is not None:
        return written
    if eos_id is None:
        raise ValueError(
            f"{path} has no index ({_index.sidecar(path)}.npy): give eos_id= to find its "
            "documents by their end token, doc_index= for your own offsets, or write it "
            "with flowloader.text.write_tokens"
        )
    return _index.scanned(path, _index.checked_dtype(dtype, path), eos_id, cache_dir)
