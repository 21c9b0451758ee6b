"""A strict reader for the IDX format of the MNIST files.

Layout: two zero bytes, a type code, the number of dimensions, then each dimension as a
big-endian uint32, then the values, big-endian. Everything is checked against the file size
before any allocation, so a truncated or lying file is a clear ``ValueError`` naming the file,
never a huge allocation or a crash.
"""

from __future__ import annotations

import gzip
import os

import numpy as np

# type code -> big-endian dtype
IDX_TYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
MAX_DIMENSIONS = 4


class IDXError(ValueError):
    """The file is not a valid IDX file."""


def read_bytes(path: str) -> bytes:
    """The file's bytes; ``.gz`` files are decompressed."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as stream:
            return stream.read()
    except (OSError, EOFError) as error:  # bad gzip data, truncated gzip stream
        raise IDXError(f"{path}: cannot read the file: {error}") from None


def parse_idx(data: bytes, path: str = "<bytes>") -> np.ndarray:
    """The array stored in IDX ``data`` (native byte order)."""
    if len(data) < 4:
        raise IDXError(f"{path}: {len(data)} bytes is too short for an IDX header")
    if data[0] != 0 or data[1] != 0:
        raise IDXError(f"{path}: bad magic number {data[:4].hex()}: an IDX file starts with 0000")
    type_code, ndim = data[2], data[3]
    if type_code not in IDX_TYPES:
        known = ", ".join(f"0x{code:02x}" for code in IDX_TYPES)
        raise IDXError(f"{path}: unknown data type code 0x{type_code:02x} (known: {known})")
    if not 1 <= ndim <= MAX_DIMENSIONS:
        raise IDXError(f"{path}: {ndim} dimensions; expected 1 to {MAX_DIMENSIONS}")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise IDXError(f"{path}: truncated header: {len(data)} bytes, the header needs {header}")
    shape = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    dtype = IDX_TYPES[type_code]
    expected = header + dtype.itemsize * int(np.prod(shape, dtype=object))
    if len(data) != expected:
        problem = "truncated" if len(data) < expected else "has trailing bytes"
        raise IDXError(
            f"{path}: {problem}: the header promises shape {shape} of {dtype.name} "
            f"({expected} bytes with the header) but the file has {len(data)} bytes"
        )
    try:  # an empty array can still declare dimensions no array can have
        values = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    except ValueError as error:
        raise IDXError(
            f"{path}: the header's shape {shape} is not a possible array: {error}"
        ) from None
    return values.astype(dtype.newbyteorder("="))


def read_idx(path: str) -> np.ndarray:
    """Read an IDX file (optionally gzipped), strictly."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"IDX file not found: {path}")
    return parse_idx(read_bytes(path), path)


def read_image_file(path: str) -> np.ndarray:
    """uint8 images of shape (N, H, W)."""
    images = read_idx(path)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise IDXError(
            f"{path}: expected uint8 images (N, H, W), found {images.dtype} {images.shape}"
        )
    return images


def read_label_file(path: str) -> np.ndarray:
    """int64 labels of shape (N,)."""
    labels = read_idx(path)
    if labels.ndim != 1 or labels.dtype != np.uint8:
        raise IDXError(f"{path}: expected uint8 labels (N,), found {labels.dtype} {labels.shape}")
    return labels.astype(np.int64)


def encode_idx(array: np.ndarray) -> bytes:
    """The IDX encoding of ``array`` (for writing sample data)."""
    codes = [
        c for c, d in IDX_TYPES.items() if d.newbyteorder("=") == array.dtype.newbyteorder("=")
    ]
    if not codes:
        raise ValueError(f"IDX cannot store dtype {array.dtype}")
    code = codes[0]
    header = bytes([0, 0, code, array.ndim]) + np.asarray(array.shape, dtype=">u4").tobytes()
    return header + np.ascontiguousarray(array, dtype=IDX_TYPES[code]).tobytes()
