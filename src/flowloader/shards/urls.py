"""Shard lists: a list of URLs or paths, a local folder (its ``*.tar``), a glob
(``shards/*.tar``), a brace pattern (``shard-{000000..000146}.tar``,
``{train,val}-{0..3}.tar``), or a text file naming one shard per line."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from typing import Any

from . import remote

_BRACE = re.compile(r"\{([^{}]*)\}")
_RANGE = re.compile(r"^(\d+)\.\.(\d+)$")
_GLOB = re.compile(r"[*?\[]")
_NEVER_GLOBBED = ("pipe:", "http://", "https://")


def expand_braces(pattern: str) -> list[str]:
    """Every name a brace pattern stands for, in order: ``{a,b}`` alternatives and
    ``{000..012}`` numeric ranges (zero padding kept), any number of them."""
    match = _BRACE.search(pattern)
    if match is None:
        return [pattern]
    body, head, tail = match.group(1), pattern[: match.start()], pattern[match.end() :]
    numeric = _RANGE.match(body)
    if numeric is not None:
        first, last = numeric.groups()
        if int(last) < int(first):
            raise ValueError(f"the range {{{body}}} in {pattern!r} counts down")
        width = len(first) if first.startswith("0") else 0
        choices = [str(n).zfill(width) for n in range(int(first), int(last) + 1)]
    else:
        choices = body.split(",")
    return [name for choice in choices for name in expand_braces(head + choice + tail)]


def shard_list(
    urls: str | os.PathLike | Sequence[str], storage_options: dict[str, Any] | None = None
) -> list[str]:
    """The shards ``urls`` names: a sequence of them, a local folder (its ``*.tar``, sorted),
    a glob (``shards/*.tar``, sorted; on object storage through fsspec with
    ``storage_options``), a brace pattern, or a local ``.txt`` file with one per line (blank
    lines and ``#`` comments ignored; relative names are relative to the file)."""
    if isinstance(urls, os.PathLike):
        urls = os.fspath(urls)
    if isinstance(urls, str):
        found = _named_by(urls, storage_options)
    else:
        found = [os.fspath(url) for url in urls]  # type: ignore[union-attr]  # (a sequence)
    if not found:
        raise ValueError("no shards given")
    return found


def _named_by(text: str, storage_options: dict[str, Any] | None) -> list[str]:
    """The shards one string names (a listing file, a folder, or patterns)."""
    if not is_remote(text):
        path = local_path(text)
        if path.endswith(".txt") and os.path.isfile(path):
            return _listed_in(path)
        if os.path.isdir(path):
            return _tars_in(path)
    return [name for part in expand_braces(text) for name in _globbed(part, storage_options)]


def _listed_in(listing: str) -> list[str]:
    base = os.path.dirname(os.path.abspath(listing))
    with open(listing, encoding="utf-8") as stream:
        lines = [line.strip() for line in stream]
    names = [line for line in lines if line and not line.startswith("#")]
    return [name if is_remote(name) else os.path.join(base, name) for name in names]


def _tars_in(directory: str) -> list[str]:
    """The ``*.tar`` files in ``directory`` in sorted order, which is the order of the
    zero-padded names ``flowloader make-shards`` gives them."""
    found = sorted(glob.glob(os.path.join(glob.escape(directory), "*.tar")))
    if not found:
        raise FileNotFoundError(f"no .tar shards in the folder {directory}")
    return found


def _globbed(pattern: str, storage_options: dict[str, Any] | None) -> list[str]:
    """``pattern`` itself, or the shards it matches, sorted, when it is a glob. Never a
    glob: an existing local file (its name may hold ``[``), a ``pipe:`` command, an HTTP URL
    (``?`` starts its query, and HTTP cannot list a folder)."""
    if pattern.startswith(("http://", "https://")) and "*" in pattern:
        raise ValueError(
            f"{pattern}: HTTP cannot list a folder; name the shards with a brace pattern "
            "(shard-{000000..000146}.tar) or a list"
        )
    if not _GLOB.search(pattern) or pattern.startswith(_NEVER_GLOBBED):
        return [pattern]
    if is_remote(pattern):
        found = remote.glob(pattern, storage_options)
    elif os.path.exists(local_path(pattern)):
        return [pattern]
    else:
        found = sorted(glob.glob(local_path(pattern)))
    if not found:
        raise FileNotFoundError(f"no shards match {pattern}")
    return found


def is_remote(url: str) -> bool:
    """True for a URL with a scheme other than ``file`` (``http://``, ``s3://``, ...)."""
    scheme, separator, _ = url.partition("://")
    return bool(separator) and scheme != "file" and "/" not in scheme


def local_path(url: str) -> str:
    return url[len("file://") :] if url.startswith("file://") else url
