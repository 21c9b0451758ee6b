"""Reading remote shards: ``http(s)://`` with the standard library, any other scheme
(``s3://``, ``gs://``, ...) through fsspec when it and its backend are installed.

Whole shards are fetched into a local :class:`ShardCache`; single samples of an HTTP shard
can also be read with one byte-range request each (:func:`read_range`). Transient failures
(a dropped connection, a short read, a 5xx) are retried with backoff; a missing shard is a
FileNotFoundError at once. Every error names the URL.
"""

from __future__ import annotations

import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import IO, Any, TypeVar

T = TypeVar("T")

RETRIES = 3
TIMEOUT_S = 60.0
_CHUNK = 1 << 20


class RemoteShardError(OSError):
    """A remote shard could not be read, after retries."""


def _http(url: str, headers: dict[str, str] | None = None) -> IO[bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        return urllib.request.urlopen(request, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as error:
        if error.code in (403, 404, 410):
            raise FileNotFoundError(f"shard not found: {url} (HTTP {error.code})") from None
        raise


def _fsspec(url: str) -> Any:
    try:
        import fsspec
    except ImportError:
        raise ImportError(
            f"reading {url} needs fsspec and its backend for that scheme "
            "(pip install 'flowloader[remote]', plus s3fs for s3://)"
        ) from None
    return fsspec


def _fsspec_open(url: str, options: dict | None) -> IO[bytes]:
    return _fsspec(url).open(url, "rb", **(options or {})).open()


def glob(pattern: str, options: dict | None = None) -> list[str]:
    """The URLs of the objects matching the glob ``pattern`` (``s3://bucket/train-*.tar``),
    sorted, listed through fsspec (not for http(s), which cannot list)."""
    filesystem, path = _fsspec(pattern).core.url_to_fs(pattern, **(options or {}))
    return sorted(filesystem.unstrip_protocol(found) for found in filesystem.glob(path))


def open_remote(url: str, options: dict | None = None) -> IO[bytes]:
    """A stream of the object at ``url``; ``options``: fsspec's storage options (an S3
    endpoint, credentials...), for schemes other than http(s)."""
    if url.startswith(("http://", "https://")):
        return _http(url)
    return _fsspec_open(url, options)


def retrying(url: str, attempt: Callable[[], T]) -> T:
    """``attempt()``, tried again after transient errors (not after FileNotFoundError)."""
    delay = 0.2
    for tries_left in range(RETRIES, -1, -1):
        try:
            return attempt()
        except FileNotFoundError:
            raise
        except (OSError, urllib.error.URLError, ValueError) as error:
            if tries_left == 0:
                raise RemoteShardError(
                    f"could not read {url} after {RETRIES + 1} attempts: "
                    f"{type(error).__name__}: {error}"
                ) from error
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")


def download(
    url: str, destination: str, expected_bytes: int | None = None, options: dict | None = None
) -> int:
    """Copy the whole object at ``url`` into the file ``destination``; returns its size.
    A copy shorter than the server's Content-Length (or than ``expected_bytes``) raises."""

    def attempt() -> int:
        with open_remote(url, options) as source, open(destination, "wb") as target:
            shutil.copyfileobj(source, target, _CHUNK)
            size = target.tell()
            announced = getattr(source, "headers", {}).get("Content-Length")
        wanted = expected_bytes if expected_bytes is not None else announced
        if wanted is not None and int(wanted) != size:
            raise RemoteShardError(f"{url} arrived with {size} bytes, expected {wanted}")
        return size

    return retrying(url, attempt)


def read_range(url: str, offset: int, size: int) -> bytes:
    """``size`` bytes at ``offset`` of the HTTP object at ``url``: one range request."""

    def attempt() -> bytes:
        headers = {"Range": f"bytes={offset}-{offset + size - 1}"}
        with _http(url, headers) as response:
            data = response.read()
            status = getattr(response, "status", 206)
        if status != 206 or len(data) != size:
            raise RemoteShardError(
                f"{url}: asked for {size} bytes at {offset}, got {len(data)} (HTTP {status})"
            )
        return data

    return retrying(url, attempt)


def read_small(url: str, options: dict | None = None) -> bytes | None:
    """A small object (an index sidecar) whole, or None if there is none."""
    try:

        def attempt() -> bytes:
            with open_remote(url, options) as source:
                return source.read()

        return retrying(url, attempt)
    except FileNotFoundError:
        return None
