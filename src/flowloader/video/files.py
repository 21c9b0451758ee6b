"""Which local files ``VideoClips`` and ``AudioClips`` are given: a file, a folder (its files
with the format's suffixes, recursively, sorted), a glob (its matches, sorted), or a list of
these (in the order given), as ``flowloader.tables`` resolves a table's local files; and the
user's cache directory, where the indexes are kept.

It imports nothing optional (``flowloader.tables.sources`` comes with pyarrow, which video
does not need).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence

GLOB_CHARACTERS = frozenset("*?[")


def local_files(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    suffixes: tuple[str, ...],
    what: str,
    ignore: tuple[str, ...] = (),
) -> list[str]:
    """The files ``source`` names, in order: a file as it is; a folder's files whose names end
    in one of ``suffixes`` (any case), recursively, sorted; a glob's files, sorted; a list,
    each of its items so. Files whose names end in one of ``ignore`` (a cache's files) are
    left out of folders and globs. ValueError for an empty list; FileNotFoundError naming an
    item that names no file, or a folder or glob that holds no ``what``."""
    items = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    if not items:
        raise ValueError(f"no {what} file given: the list is empty")
    found: list[str] = []
    for item in items:
        found += _expand(os.fspath(item), suffixes, what, ignore)
    return found


def _expand(text: str, suffixes: tuple[str, ...], what: str, ignore: tuple[str, ...]) -> list[str]:
    if os.path.isdir(text):
        lowered = tuple(s.lower() for s in suffixes)
        pattern = os.path.join(glob.escape(text), "**", "*")
        matches = [p for p in glob.glob(pattern, recursive=True) if p.lower().endswith(lowered)]
        kind = f"no {what} files there (by suffix: {', '.join(suffixes)})"
    elif os.path.exists(text):
        return [text]
    elif GLOB_CHARACTERS & set(text):
        matches = glob.glob(text, recursive=True)
        kind = f"no {what} files match"
    else:
        raise FileNotFoundError(f"{text}: no such file or folder")
    files = sorted(p for p in matches if os.path.isfile(p) and not p.endswith(ignore))
    if not files:
        raise FileNotFoundError(f"{text}: {kind}")
    return files


def user_cache_dir(*parts: str) -> str:
    """``$FLOWLOADER_CACHE``, else ``$XDG_CACHE_HOME/flowloader``, else
    ``~/.cache/flowloader``; joined with ``parts``."""
    base = os.environ.get("FLOWLOADER_CACHE")
    if not base:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        base = os.path.join(cache, "flowloader")
    return os.path.join(base, *parts)
