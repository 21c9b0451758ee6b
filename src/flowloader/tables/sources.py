"""Which files a table source names, and how to open them: a file, a list, a folder (its
files with the format's suffix, recursively, in sorted order), a glob, or a URL (``s3://``,
``gs://``, ``http(s)://``, any fsspec protocol; ``storage_options`` go to fsspec)."""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

_GLOB = set("*?[")


@dataclass
class Files:
    """The files of one table and the filesystem they are read from (None: local)."""

    paths: list[str]
    filesystem: Any = None  # an fsspec filesystem, or None for the local one
    storage_options: dict[str, Any] = field(default_factory=dict)

    def open(self, path: str) -> IO[bytes]:
        if self.filesystem is None:
            return open(path, "rb")
        # No read-ahead: Arrow asks for exactly the footer and the column chunks it needs,
        # each read one ranged request, so unselected columns are never fetched.
        return self.filesystem.open(path, "rb", cache_type="none")

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
