"""Shard lists: a list of URLs or paths, a brace pattern (``shard-{000000..000146}.tar``,
``{train,val}-{0..3}.tar``), or a text file naming one shard per line."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

_BRACE = re.compile(r"\{([^{}]*)\}")
_RANGE = re.compile(r"^(\d+)\.\.(\d+)$")


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


def shard_list(urls: str | os.PathLike | Sequence[str]) -> list[str]:
    """The shards ``urls`` names: a sequence of them, a brace pattern, or a local ``.txt``
    file with one per line (blank lines and ``#`` comments ignored; relative names are
    relative to the file)."""
    if isinstance(urls, os.PathLike):
        urls = os.fspath(urls)
    if isinstance(urls, str):
        if urls.endswith(".txt") and os.path.isfile(urls):
            base = os.path.dirname(os.path.abspath(urls))
            with open(urls, encoding="utf-8") as listing:
                lines = [line.strip() for line in listing]
            names = [line for line in lines if line and not line.startswith("#")]
            return [name if is_remote(name) else os.path.join(base, name) for name in names]
        found = expand_braces(urls)
    else:
        found = [os.fspath(url) for url in urls]  # type: ignore[union-attr]  # (a sequence)
    if not found:
        raise ValueError("no shards given")
    return found


def is_remote(url: str) -> bool:
    """True for a URL with a scheme other than ``file`` (``http://``, ``s3://``, ...)."""
    scheme, separator, _ = url.partition("://")
    return bool(separator) and scheme != "file" and "/" not in scheme


def local_path(url: str) -> str:
    return url[len("file://") :] if url.startswith("file://") else url
