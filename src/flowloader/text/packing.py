"""Packing documents into rows of ``seq_len`` tokens, one block of documents at a time.

A block's documents are cut into pieces of at most ``seq_len`` tokens (a longer document
becomes consecutive pieces; ``long_docs="error"`` refuses it instead), and the pieces are put
into rows by length alone, so a block's rows are a pure function of its documents' lengths:

- ``best_fit``: longest piece first, each into the fullest row it still fits (best-fit
  decreasing: within a few tokens of the fewest rows);
- ``first_fit``: in the block's order, each into the first row it fits (as Grain's online
  packer does).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

METHODS = ("best_fit", "first_fit")
LONG_DOCS = ("split", "error")


@dataclass(frozen=True)
class BlockPlan:
    """The pieces of one block, grouped by row: row k is ``rows[k]:rows[k+1]`` of the piece
    arrays (its pieces in document order)."""

    docs: np.ndarray  # the document each piece comes from
    starts: np.ndarray  # where in its document
    lengths: np.ndarray
    rows: np.ndarray  # row boundaries, len = rows + 1

    @property
    def num_rows(self) -> int:
        return len(self.rows) - 1


def cut(
    docs: np.ndarray, lengths: np.ndarray, seq_len: int, long_docs: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(document, start, length) of every piece, in document order."""
    if long_docs == "error" and np.any(lengths > seq_len):
        k = int(np.flatnonzero(lengths > seq_len)[0])
        raise ValueError(
            f"document {int(docs[k])} has {int(lengths[k])} tokens, more than seq_len={seq_len} "
            "(long_docs='split' cuts such documents into consecutive pieces)"
        )
    counts = -(-lengths // seq_len)  # an empty document has no piece
    piece_docs = np.repeat(docs, counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    starts = (np.arange(len(piece_docs)) - first) * seq_len
    return piece_docs, starts, np.minimum(np.repeat(lengths, counts) - starts, seq_len)


def plan_block(
    docs: np.ndarray, lengths: np.ndarray, seq_len: int, method: str, long_docs: str
) -> BlockPlan:
    piece_docs, starts, piece_lengths = cut(docs, lengths, seq_len, long_docs)
    row_of = (_best_fit if method == "best_fit" else _first_fit)(piece_lengths.tolist(), seq_len)
    order = np.lexsort((starts, piece_docs, row_of))  # by row, then document order
    counts = np.bincount(row_of, minlength=int(row_of.max()) + 1 if len(row_of) else 0)
    rows = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return BlockPlan(piece_docs[order], starts[order], piece_lengths[order], rows)


def _best_fit(lengths: list[int], seq_len: int) -> np.ndarray:
    row_of = np.empty(len(lengths), dtype=np.int64)
    open_rows: list[tuple[int, int]] = []  # (room left, row), sorted
    rows = 0
    for k in sorted(range(len(lengths)), key=lambda k: (-lengths[k], k)):
        length = lengths[k]
        at = bisect.bisect_left(open_rows, (length, -1))
        if at < len(open_rows):
            room, row = open_rows.pop(at)
        else:
            room, row, rows = seq_len, rows, rows + 1
        row_of[k] = row
        if room - length:
            bisect.insort(open_rows, (room - length, row))
    return row_of


def _first_fit(lengths: list[int], seq_len: int) -> np.ndarray:
    row_of = np.empty(len(lengths), dtype=np.int64)
    room = np.empty(len(lengths), dtype=np.int64)
    rows = 0
    for k, length in enumerate(lengths):
        fits = np.flatnonzero(room[:rows] >= length)
        row = int(fits[0]) if fits.size else rows
        if row == rows:
            room[row], rows = seq_len, rows + 1
        room[row] -= length
        row_of[k] = row
    return row_of
