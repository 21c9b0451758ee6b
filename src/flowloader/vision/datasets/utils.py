"""Downloading, checking and unpacking dataset files (torchvision's helpers, without torch)."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import sys
import tarfile
import urllib.error
import urllib.request

_CHUNK = 1 << 20
_USER_AGENT = "flowloader"


def calculate_md5(path: str, chunk_size: int = _CHUNK) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as stream:
        while chunk := stream.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def check_integrity(path: str, md5: str | None = None) -> bool:
    """The file exists and, when ``md5`` is given, has that checksum."""
    if not os.path.isfile(path):
        return False
    return md5 is None or calculate_md5(path) == md5


def _progress(received: int, total: int | None, label: str) -> None:
    if not sys.stderr.isatty() and total is not None and received < total:
        return
    if total:
        filled = int(30 * received / total)
        bar = "#" * filled + "." * (30 - filled)
        text = f"\r{label} [{bar}] {received / 2**20:6.1f}/{total / 2**20:.1f} MiB"
    else:
        text = f"\r{label} {received / 2**20:6.1f} MiB"
    sys.stderr.write(text)
    if total is not None and received >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def download_url(url: str, root: str, filename: str | None = None, md5: str | None = None) -> str:
    """Download ``url`` into ``root`` (kept if already there with the right md5); returns the
    path. Raises RuntimeError on a checksum mismatch and URLError when the server fails."""
    filename = filename or os.path.basename(url)
    path = os.path.join(os.path.expanduser(root), filename)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if check_integrity(path, md5):
        return path
    partial = path + ".part"
    request = urllib.request.Request(url, headers={"User-Agent": _USER_AGENT})
    with urllib.request.urlopen(request, timeout=60) as response, open(partial, "wb") as out:
        total = response.headers.get("Content-Length")
        total_bytes = int(total) if total and total.isdigit() else None
        received = 0
        while chunk := response.read(_CHUNK):
            out.write(chunk)
            received += len(chunk)
            _progress(received, total_bytes, f"Downloading {filename}")
    if md5 is not None and calculate_md5(partial) != md5:
        os.remove(partial)
        raise RuntimeError(f"{url}: the download's md5 does not match {md5}; not using it")
    os.replace(partial, path)
    return path


def extract_gzip(path: str, remove_finished: bool = False) -> str:
    """``x.gz`` -> ``x`` next to it; returns the new path."""
    target = path[: -len(".gz")]
    with gzip.open(path, "rb") as source, open(target + ".part", "wb") as out:
        shutil.copyfileobj(source, out, _CHUNK)
    os.replace(target + ".part", target)
    if remove_finished:
        os.remove(path)
    return target


class UnsafeArchiveError(ValueError):
    """An archive member would land outside the folder it is extracted into."""


def _check_member(member: tarfile.TarInfo, root: str, archive: str) -> None:
    """Refuse a member that escapes ``root``: an absolute or ``..`` path, a link pointing
    outside, or a device or FIFO (a dataset archive holds files and folders)."""
    target = os.path.realpath(os.path.join(root, member.name))
    problem = None
    if os.path.isabs(member.name) or os.path.commonpath([root, target]) != root:
        problem = "its path leads outside the extraction folder"
    elif member.issym() or member.islnk():
        base = os.path.dirname(target) if member.issym() else root
        link = os.path.realpath(os.path.join(base, member.linkname))
        if os.path.isabs(member.linkname) or os.path.commonpath([root, link]) != root:
            problem = f"it links to {member.linkname!r}, outside the extraction folder"
    elif not (member.isfile() or member.isdir()):
        problem = "it is a device or FIFO, not a file or folder"
    if problem:
        raise UnsafeArchiveError(
            f"{archive}: refusing to extract member {member.name!r}: {problem} ({root})"
        )


def extract_tar(path: str, to_path: str) -> str:
    """Extract the tar archive ``path`` (plain, .gz, .bz2 or .xz) into ``to_path``; every
    member is checked first, so a crafted archive writes nothing outside ``to_path``."""
    root = os.path.realpath(to_path)
    os.makedirs(root, exist_ok=True)
    with tarfile.open(path) as archive:
        members = archive.getmembers()
        for member in members:
            _check_member(member, root, path)
        if hasattr(tarfile, "data_filter"):  # Python's own guard too, where it has one
            archive.extractall(root, members, filter="data")
        else:  # pragma: no cover - Python < 3.10.12
            archive.extractall(root, members)
    return to_path


def download_and_extract_archive(
    url: str, download_root: str, filename: str | None = None, md5: str | None = None
) -> str:
    """Download, check, and unpack a tar archive (into ``download_root``) or a ``.gz`` file
    (next to it); other files are left as they are. Returns the unpacked path."""
    path = download_url(url, download_root, filename, md5)
    if tarfile.is_tarfile(path):
        return extract_tar(path, download_root)
    return extract_gzip(path) if path.endswith(".gz") else path


__all__ = [
    "URLError",
    "UnsafeArchiveError",
    "calculate_md5",
    "check_integrity",
    "download_and_extract_archive",
    "download_url",
    "extract_gzip",
    "extract_tar",
]
URLError = urllib.error.URLError
