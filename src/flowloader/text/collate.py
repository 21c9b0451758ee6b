"""What attention kernels want from a batch of packed rows: flash-attention's varlen
``cu_seqlens`` / ``max_seqlen``, TRL's ``position_ids``, or a block-diagonal mask."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..collate import default_collate


def collate_packed(rows: Sequence[dict[str, np.ndarray]]) -> dict[str, Any]:
    """``default_collate`` of packed rows (``tokens``, ``segment_ids``, ``positions``, each
    (batch, seq_len)), plus ``position_ids`` (the positions, as TRL's padding-free path names
    them), ``cu_seqlens`` (int32 offsets of every segment of the flattened batch, padding runs
    included as segments of their own, so the last offset is batch·seq_len) and
    ``max_seqlen``, for flash-attention's varlen kernels."""
    batch = default_collate(list(rows))
    segment_ids = np.asarray(batch["segment_ids"])
    flat = segment_ids.reshape(-1)
    row_starts = np.zeros(flat.shape, dtype=bool)
    row_starts[:: segment_ids.shape[1]] = True
    starts = np.flatnonzero(row_starts | np.r_[True, flat[1:] != flat[:-1]])
    cu_seqlens = np.append(starts, len(flat)).astype(np.int32)
    batch["position_ids"] = batch["positions"]
    batch["cu_seqlens"] = cu_seqlens
    batch["max_seqlen"] = int(np.diff(cu_seqlens).max()) if len(cu_seqlens) > 1 else 0
    return batch


def block_diagonal_mask(segment_ids: np.ndarray) -> np.ndarray:
    """(batch, seq_len, seq_len) bool: token i may attend to token j when both belong to the
    same document of the row (padding attends to nothing). Causality is the model's to add."""
    segment_ids = np.asarray(segment_ids)
    same = segment_ids[..., :, None] == segment_ids[..., None, :]
    return same & (segment_ids[..., :, None] != 0)
