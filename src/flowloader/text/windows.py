"""TokenWindows: nanoGPT's fixed windows over flat token files, as a map-style dataset."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..dataset import Dataset
from . import index as _index
from .tokens import TokenFile, as_paths


class TokenWindows(Dataset[dict[str, np.ndarray]]):
    """Window i is ``{"inputs": t[s : s + seq_len], "targets": t[s + 1 : s + seq_len + 1]}``
    with ``s = i * stride`` over one file's tokens, for every s whose window and targets fit
    in the file (``stride`` defaults to ``seq_len``: windows do not overlap, and each token is
    an input at most once; the file's last tokens that make no whole window, up to
    ``seq_len`` of them, are not read, as nanoGPT's ``get_batch`` never starts there).
    Read-only views of a memory map, in the file's dtype. As a map-style dataset it is
    shuffled by the loader's sampler, the same for any num_workers, and resumed exactly by
    ``state_dict()``: what nanoGPT's random ``get_batch`` is not.
    ``dtype`` is needed only for a file without an index."""

    def __init__(
        self,
        paths: str | os.PathLike | Sequence[str | os.PathLike],
        seq_len: int,
        *,
        stride: int | None = None,
        dtype: Any = None,
    ) -> None:
        if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len <= 0:
            raise ValueError(f"seq_len should be a positive int, but got {seq_len!r}")
        stride = seq_len if stride is None else stride
        if isinstance(stride, bool) or not isinstance(stride, int) or stride <= 0:
            raise ValueError(f"stride should be a positive int, but got {stride!r}")
        self.seq_len, self.stride = seq_len, stride
        self.files = [_whole_file(path, dtype) for path in as_paths(paths)]
        counts = [max(0, (int(f.offsets[-1]) - seq_len - 1) // stride + 1) for f in self.files]
        self._first = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    def __len__(self) -> int:
        return int(self._first[-1])

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        i = int(i)
        if not 0 <= i < len(self):
            raise IndexError(f"window {i} is out of range for {len(self)} windows")
        f = int(np.searchsorted(self._first, i, side="right") - 1)
        start = (i - int(self._first[f])) * self.stride
        window = self.files[f].tokens[start : start + self.seq_len + 1]
        return {"inputs": window[:-1], "targets": window[1:]}


def _whole_file(path: str, dtype: Any) -> TokenFile:
    """The file as one stream (its index, if any, gives only the dtype)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such token file: {path}")
    if dtype is None:
        meta = _index.read_meta(_index.sidecar(path))
        if meta is None:
            raise ValueError(
                f"{path} has no index to say its dtype: give dtype='uint16' or 'uint32'"
            )
        dtype = meta["dtype"]
    name = _index.checked_dtype(dtype, path)
    count = _index.token_count(path, name)
    return TokenFile(path, _index.TokenIndex(name, np.array([0, count], dtype=np.int64)))
