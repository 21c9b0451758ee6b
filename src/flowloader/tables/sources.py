"""Which files a table source names, and how to read them: a file, a list, a folder (its
files with the format's suffix, recursively, in sorted order), a glob, or a URL (``s3://``,
``gs://``, ``http(s)://``, any fsspec protocol; ``storage_options`` go to fsspec).

A remote read that fails (a dropped connection, a 5xx, a short read) is tried again with
backoff, as the shard cache does; after the last try the error names the URL and what was
being read. Nothing is written locally, so nothing partial is left behind.
"""

from __future__ import annotations

import glob
import os
import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, TypeVar

T = TypeVar("T")

_GLOB = set("*?[")
# A failed remote read is tried this many more times, after 0.2 s, then 0.4 s, then 0.8 s.
RETRIES = 3
FIRST_DELAY_S = 0.2
# Failures no retry can mend.
PERMANENT: tuple[type[BaseException], ...] = (
    FileNotFoundError,
    PermissionError,
    IsADirectoryError,
    MemoryError,
)


@dataclass
class Files:
    """The files of one table and the filesystem they are read from (None: local)."""

    paths: list[str]
    filesystem: Any = None  # an fsspec filesystem, or None for the local one
    storage_options: dict[str, Any] = field(default_factory=dict)
    pid: int = field(default_factory=os.getpid)  # the process the filesystem was made in

    def open(self, path: str) -> IO[bytes]:
        if self.filesystem is None:
            return open(path, "rb")
        if self.pid != os.getpid():
            # A forked worker: fsspec's async filesystems (s3fs, http) refuse to run in a
            # child what the parent started; a copy made here has its own loop and sessions.
            self.filesystem = pickle.loads(pickle.dumps(self.filesystem))
            self.pid = os.getpid()
        # No read-ahead: Arrow asks for exactly the footer and the column chunks it needs,
        # each read one ranged request, so unselected columns are never fetched.
        return self.filesystem.open(path, "rb", cache_type="none")

    def read(
        self,
        path: str,
        what: str,
        reader: Callable[[IO[bytes]], T],
        permanent: tuple[type[BaseException], ...] = (),
    ) -> T:
        """``reader(handle)`` of the file at ``path``, opened for it and closed after. A
        remote file is tried again with backoff after a failure (not one of ``PERMANENT`` or
        ``permanent``); after the last try an OSError names the URL and ``what``."""
        attempts = 1 if self.filesystem is None else RETRIES + 1
        delay = FIRST_DELAY_S
        for attempt in range(1, attempts + 1):
            try:
                with self.open(path) as handle:
                    return reader(handle)
            except PERMANENT + permanent:
                raise
            except Exception as error:  # remote backends raise their own types (aiohttp's)
                if attempt == attempts:
                    tries = f" after {attempts} attempts" if attempts > 1 else ""
                    raise OSError(
                        f"{self.name(path)}: cannot read {what}{tries} "
                        f"({type(error).__name__}: {error})"
                    ) from error
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def name(self, path: str) -> str:
        """The path as a user gave it: with its protocol for a remote file."""
        if self.filesystem is None:
            return path
        protocol = self.filesystem.protocol
        protocol = protocol[0] if isinstance(protocol, (tuple, list)) else protocol
        return path if "://" in path or protocol == "file" else f"{protocol}://{path}"


def resolve(
    source: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    suffixes: tuple[str, ...],
    filesystem: Any = None,
    storage_options: dict[str, Any] | None = None,
) -> Files:
    """The files ``source`` names; FileNotFoundError naming what matched nothing."""
    options = dict(storage_options or {})
    items = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    if not items:
        raise ValueError("the table source is an empty list of files")
    paths: list[str] = []
    for item in items:
        text = os.fspath(item)
        if filesystem is None and "://" in text:
            filesystem = _fsspec_filesystem(text, options)
        paths += _expand(text, suffixes, filesystem)
    return Files(paths, filesystem, options)


def _fsspec_filesystem(url: str, options: dict[str, Any]) -> Any:
    try:
        import fsspec
    except ImportError as error:
        raise ImportError(
            f"{url}: reading tables from a URL needs fsspec (and s3fs for s3://, gcsfs for "
            'gs://): pip install "flowloader[tables,s3]"'
        ) from error
    filesystem, _ = fsspec.core.url_to_fs(url, **options)
    return filesystem


def _expand(text: str, suffixes: tuple[str, ...], filesystem: Any) -> list[str]:
    if filesystem is None:
        if _GLOB & set(text):
            found = sorted(glob.glob(text, recursive=True))
        elif os.path.isdir(text):
            found = sorted(
                path
                for path in glob.glob(os.path.join(text, "**", "*"), recursive=True)
                if path.endswith(suffixes) and os.path.isfile(path)
            )
        elif os.path.exists(text):
            return [text]
        else:
            raise FileNotFoundError(f"{text}: no such file or folder")
    else:
        path = filesystem._strip_protocol(text)
        if _GLOB & set(path):
            found = sorted(filesystem.glob(path))
        else:
            try:
                info = filesystem.info(path)  # one request (HTTP: HEAD; no body fetched)
            except FileNotFoundError:
                raise FileNotFoundError(f"{text}: no such file or folder") from None
            if info.get("type") != "directory":
                return [path]
            found = sorted(p for p in filesystem.find(path) if p.endswith(suffixes))
    if not found:
        raise FileNotFoundError(f"{text}: no {' or '.join(suffixes)} files there")
    return found
