"""Where the documents of a flat token file begin: the sidecar index, and the scan that makes
one from an end-of-document token.

A token file is a flat array of token ids (``uint16`` or ``uint32``, little-endian): nanoGPT's
``train.bin``, or what :func:`flowloader.text.write_tokens` writes. Its index is two files
beside it: ``<file>.idx.npy``, the int64 offsets of the documents (one more than there are
documents; the first 0, the last the number of tokens), opened as a memory map, and
``<file>.idx.json``, what the offsets describe (dtype, tokens, documents, the file's size and
a digest of a few of its blocks, and the end-of-document id when a scan made them). A scan's
index goes beside the file, or into a cache directory when the file's folder cannot be
written, keyed by the id and the dtype.

An index belongs to a file by content, not by time: its size and the digest of its first,
middle and last blocks, so a copy (``cp -r``, a download, ``rsync`` without ``-t``) opens as it
is. Several processes may open one file at once (every rank of a torchrun job): each writes
its index through a temporary name of its own and moves it into place, so a reader sees a
whole index or none.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

FORMAT = "flowloader.tokens"
DTYPES = ("uint16", "uint32")
# Tokens read at once while scanning for end-of-document ids.
SCAN_CHUNK = 1 << 26
# Bytes of each block (first, middle, last) that an index's digest of its file covers.
DIGEST_BLOCK = 1 << 12
DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "flowloader", "tokens")


@dataclass(frozen=True)
class TokenIndex:
    dtype: str
    offsets: np.ndarray  # int64, documents + 1

    @property
    def documents(self) -> int:
        return len(self.offsets) - 1


def checked_dtype(dtype: Any, path: str) -> str:
    name = np.dtype(dtype).name if dtype is not None else None
    if name not in DTYPES:
        raise ValueError(f"{path}: token ids must be uint16 or uint32, not {dtype!r}")
    return name


def token_count(path: str, dtype: str) -> int:
    """The number of tokens in ``path``; ValueError when its size is not a whole number."""
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"no such token file: {path}") from None
    itemsize = np.dtype(dtype).itemsize
    if size % itemsize:
        raise ValueError(
            f"{path} has {size} bytes, not a multiple of {itemsize} ({dtype} token ids): "
            "truncated, or another dtype"
        )
    return size // itemsize


def sidecar(path: str) -> str:
    return path + ".idx"


def file_digest(path: str) -> str:
    """A digest of ``path``'s size and of its first, middle and last DIGEST_BLOCK bytes: what
    tells the file an index was made from (a copy has the same, a rewrite another)."""
    size = os.path.getsize(path)
    digest = hashlib.blake2b(str(size).encode(), digest_size=16)
    with open(path, "rb") as stream:
        for at in sorted({0, max(size // 2 - DIGEST_BLOCK // 2, 0), max(size - DIGEST_BLOCK, 0)}):
            stream.seek(at)
            digest.update(stream.read(DIGEST_BLOCK))
    return digest.hexdigest()


def write_atomically(target: str, write: Any) -> None:
    """``write(temporary path)``, then move it onto ``target``: a temporary name of this
    process's own, so that processes writing the same index at once never mix their bytes."""
    temporary = f"{target}.{os.getpid()}-{uuid.uuid4().hex[:8]}.partial"
    try:
        write(temporary)
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def write_index(stem: str, dtype: str, offsets: np.ndarray, path: str, **extra: Any) -> None:
    """Write ``<stem>.npy`` and ``<stem>.json`` for the token file ``path`` (the JSON last: it
    marks the pair complete); the file's size and digest tie the index to its content."""
    offsets = offsets.astype(np.int64, copy=False)

    def save_offsets(temporary: str) -> None:
        with open(temporary, "wb") as out:
            np.save(out, offsets)

    meta = {
        "format": FORMAT,
        "version": 1,
        "dtype": dtype,
        "tokens": int(offsets[-1]),
        "documents": len(offsets) - 1,
        "file_bytes": os.path.getsize(path),
        "file_digest": file_digest(path),
        "file_mtime_ns": os.stat(path).st_mtime_ns,  # informational
        **extra,
    }

    def save_meta(temporary: str) -> None:
        with open(temporary, "w", encoding="utf-8") as out:
            json.dump(meta, out)

    write_atomically(stem + ".npy", save_offsets)
    write_atomically(stem + ".json", save_meta)


def read_meta(stem: str) -> dict[str, Any] | None:
    try:
        with open(stem + ".json", encoding="utf-8") as stream:
            meta = json.load(stream)
    except FileNotFoundError:
        return None
    return meta if meta.get("format") == FORMAT else None


def load(path: str, stem: str, dtype: str | None) -> TokenIndex | None:
    """The index at ``stem`` for the token file ``path``, checked against the file; None when
    there is none."""
    meta = read_meta(stem)
    if meta is None or not os.path.exists(stem + ".npy"):
        return None
    found = checked_dtype(meta["dtype"], path)
    if dtype is not None and checked_dtype(dtype, path) != found:
        raise ValueError(
            f"{path}: its index {stem}.json says {found} token ids, but dtype={dtype!r} was given"
        )
    offsets = np.load(stem + ".npy", mmap_mode="r")
    check_offsets(path, offsets, token_count(path, found), where=stem + ".npy")
    if not _same_content(meta, path):
        raise ValueError(
            f"{stem}.npy does not match {path}: it indexes a file of {meta.get('file_bytes')} "
            f"bytes with digest {meta.get('file_digest')}, the file has "
            f"{os.path.getsize(path)} bytes with digest {file_digest(path)} (rewritten since?)"
        )
    return TokenIndex(found, offsets)


def _same_content(meta: dict[str, Any], path: str) -> bool:
    """The index was made from this file's content: the same size, and the same digest (or,
    for an index from before digests, the same modification time)."""
    if meta.get("file_bytes") != os.path.getsize(path):
        return False
    if os.stat(path).st_mtime_ns == meta.get("file_mtime_ns") and "file_digest" not in meta:
        return True
    return meta.get("file_digest") == file_digest(path)


def check_offsets(path: str, offsets: np.ndarray, tokens: int, where: str) -> None:
    """ValueError naming ``path`` unless ``offsets`` start at 0, never decrease and end at
    the file's last token (an empty file has no document: its offsets are just [0])."""
    if offsets.ndim != 1 or len(offsets) < 1 or (len(offsets) < 2 and tokens):
        raise ValueError(f"{where}: the index of {path} lists no document")
    if offsets[0] != 0 or offsets[-1] != tokens:
        raise ValueError(
            f"{where} does not match {path}: its offsets run from {int(offsets[0])} to "
            f"{int(offsets[-1])}, the file has {tokens} tokens"
        )
    if np.any(np.diff(offsets) < 0):
        bad = int(np.flatnonzero(np.diff(offsets) < 0)[0])
        raise ValueError(f"{where}: the offsets of {path} decrease after document {bad}")


def scanned(path: str, dtype: str, eos_id: int, cache_dir: str | None) -> TokenIndex:
    """The documents of ``path`` ended by ``eos_id`` (each keeps its end token), from a cached
    scan when one matches the file, else scanned now (one pass) and cached."""
    for stem in _scan_stems(path, eos_id, dtype, cache_dir):
        meta = read_meta(stem)
        if (
            meta
            and meta.get("eos_id") == eos_id
            and meta.get("dtype") == dtype
            and _same_content(meta, path)
        ):
            index = load(path, stem, dtype)
            if index is not None:
                return index
    tokens = np.memmap(path, dtype=dtype, mode="r") if token_count(path, dtype) else np.empty(0)
    ends = [
        np.flatnonzero(tokens[start : start + SCAN_CHUNK] == eos_id) + start + 1
        for start in range(0, len(tokens), SCAN_CHUNK)
    ]
    cuts = np.concatenate([np.zeros(1, np.int64), *ends]) if ends else np.zeros(1, np.int64)
    if cuts[-1] != len(tokens):  # text after the last end token is a document too
        cuts = np.append(cuts, len(tokens))
    del tokens
    for stem in _scan_stems(path, eos_id, dtype, cache_dir):
        try:
            os.makedirs(os.path.dirname(stem) or ".", exist_ok=True)
            write_index(stem, dtype, cuts, path, eos_id=eos_id)
            break
        except OSError:  # a read-only folder: the cache directory next
            continue
    return TokenIndex(dtype, cuts)


def _scan_stems(path: str, eos_id: int, dtype: str, cache_dir: str | None) -> list[str]:
    """Where a scan's index may be: beside the file, then in the cache directory; keyed by
    the end id and the dtype (the same bytes read as other ids have other documents)."""
    absolute = os.path.abspath(path)
    digest = hashlib.sha1(absolute.encode()).hexdigest()[:16]
    cache = os.path.join(cache_dir or DEFAULT_CACHE, f"{digest}-{os.path.basename(path)}")
    key = f"eos{eos_id}.{dtype}"
    return [f"{path}.{key}.idx", f"{cache}.{key}.idx"]
