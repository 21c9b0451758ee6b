"""Packed: a map-style dataset of rows of ``seq_len`` tokens packed from documents.

Documents are taken in the order the dataset gives them (shuffle them with a Mixture's
per-source shuffle, or pass ``shuffle=True`` and call ``set_epoch``), ``block`` at a time, and
each block is packed on its own (packing.py). So row r is a pure function of its block's
documents: rows are map-style, the same for any num_workers, and a resume is a position.
Building a Packed packs every block once (lengths only, no token read) to count its rows; a
block's plan is computed again where a row of it is read, and kept (a few blocks per process).
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

from ..batching import fetch_many
from ..dataset import Dataset
from ..mixture import Mixture
from ..mixture.permutation import epoch_keys, name_hash, permute
from .packing import LONG_DOCS, METHODS, BlockPlan, plan_block

# Block plans kept per process.
CACHED_BLOCKS = 8


class Packed(Dataset[dict[str, np.ndarray]]):
    """Rows of ``seq_len`` tokens packed from the 1-D token arrays of ``dataset`` (a
    ``TokenDataset``, a ``Mixture`` of them, any map-style dataset of token arrays).

    Row r is ``{"tokens", "segment_ids", "positions"}``, arrays of length ``seq_len``:
    ``segment_ids`` numbers the row's documents 1, 2, ... (0 is padding, filled with
    ``pad_id``) and ``positions`` restart at 0 for each. A document longer than ``seq_len``
    is cut into consecutive pieces (``long_docs="split"``) or refused (``"error"``); every
    token of every document is in exactly one row (``audit()`` checks it).
    ``method``: ``"best_fit"`` or ``"first_fit"`` within each ``block`` of documents.
    ``shuffle``: documents in a seeded order per epoch (``set_epoch``), as a sampler's.
    """

    def __init__(
        self,
        dataset: Any,
        seq_len: int,
        *,
        block: int = 1024,
        method: str = "best_fit",
        pad_id: int = 0,
        long_docs: str = "split",
        shuffle: bool = False,
        seed: int = 0,
    ) -> None:
        for name, value in (("seq_len", seq_len), ("block", block)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} should be a positive int, but got {value!r}")
        if method not in METHODS:
            raise ValueError(f"method should be one of {', '.join(METHODS)}, not {method!r}")
        if long_docs not in LONG_DOCS:
            raise ValueError(
                f"long_docs should be one of {', '.join(LONG_DOCS)}, not {long_docs!r}"
            )
        self.dataset, self.seq_len, self.block = dataset, seq_len, block
        self.method, self.pad_id, self.long_docs = method, pad_id, long_docs
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0
        self.lengths = document_lengths(dataset)
        if not len(self.lengths):
            raise ValueError("Packed needs at least one document")
        self._plans: collections.OrderedDict[int, BlockPlan] = collections.OrderedDict()
        self._count_rows()

    def set_epoch(self, epoch: int) -> None:
        """With ``shuffle=True``: this epoch's document order, and so its rows (and their
        number). Call it before ``iter(loader)``; workers started earlier (persistent ones)
        keep the order they started with."""
        self.epoch = epoch
        if self.shuffle:
            self._plans.clear()
            self._count_rows()

    def _order(self, first: int, end: int) -> np.ndarray:
        """The documents at places first..end-1 of this epoch's order."""
        places = np.arange(first, end, dtype=np.int64)
        if not self.shuffle:
            return places
        n = len(self.lengths)
        keys = epoch_keys(
            self.seed,
            np.full(len(places), name_hash("packed"), np.uint64),
            np.full(len(places), self.epoch, np.int64),
        )
        return permute(places, np.full(len(places), n, np.int64), keys)

    def _count_rows(self) -> None:
        counts = [self._plan(b, keep=False).num_rows for b in range(self.num_blocks)]
        self._first_row = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    @property
    def num_blocks(self) -> int:
        return -(-len(self.lengths) // self.block)

    def _plan(self, b: int, keep: bool = True) -> BlockPlan:
        plan = self._plans.get(b)
        if plan is not None:
            self._plans.move_to_end(b)
            return plan
        docs = self._order(b * self.block, min((b + 1) * self.block, len(self.lengths)))
        plan = plan_block(docs, self.lengths[docs], self.seq_len, self.method, self.long_docs)
        if keep:
            self._plans[b] = plan
            if len(self._plans) > CACHED_BLOCKS:
                self._plans.popitem(last=False)
        return plan

    def __len__(self) -> int:
        return int(self._first_row[-1])

    def __getitem__(self, r: int) -> dict[str, np.ndarray]:
        r = int(r)
        if not 0 <= r < len(self):
            raise IndexError(f"row {r} is out of range for {len(self)} packed rows")
        b = int(np.searchsorted(self._first_row, r, side="right") - 1)
        plan = self._plan(b)
        k = r - int(self._first_row[b])
        pieces = slice(int(plan.rows[k]), int(plan.rows[k + 1]))
        docs, starts, lengths = plan.docs[pieces], plan.starts[pieces], plan.lengths[pieces]
        unique = np.unique(docs).tolist()
        texts = dict(zip(unique, fetch_many(self.dataset, unique), strict=True))
        return self._row(
            [
                texts[d][s : s + n]
                for d, s, n in zip(docs.tolist(), starts.tolist(), lengths.tolist(), strict=True)
            ]
        )

    def _row(self, parts: list[np.ndarray]) -> dict[str, np.ndarray]:
        dtype = np.result_type(*[np.asarray(p).dtype for p in parts]) if parts else np.int64
        tokens = np.full(self.seq_len, self.pad_id, dtype=dtype)
        segment_ids = np.zeros(self.seq_len, dtype=np.int32)
        positions = np.zeros(self.seq_len, dtype=np.int32)
        at = 0
        for number, part in enumerate(parts, start=1):
            n = len(part)
            tokens[at : at + n] = part
            segment_ids[at : at + n] = number
            positions[at : at + n] = np.arange(n, dtype=np.int32)
            at += n
        return {"tokens": tokens, "segment_ids": segment_ids, "positions": positions}

    def audit(self) -> dict[str, int]:
        """Check, from the plan, that every token of every document is in exactly one row
        of this epoch and that no row is longer than ``seq_len``; AssertionError naming the
        first document that is not. Returns the totals (tokens, rows, padding)."""
        covered = np.zeros(len(self.lengths), dtype=np.int64)
        for b in range(self.num_blocks):
            plan = self._plan(b, keep=False)
            row_tokens = (
                np.add.reduceat(plan.lengths, plan.rows[:-1]) if plan.num_rows else plan.lengths
            )
            if np.any(row_tokens > self.seq_len):
                raise AssertionError(f"block {b} has a row of {int(row_tokens.max())} tokens")
            if not len(plan.docs):
                continue
            order = np.lexsort((plan.starts, plan.docs))
            docs, starts, lengths = plan.docs[order], plan.starts[order], plan.lengths[order]
            same = docs[1:] == docs[:-1]  # a piece that continues the one before it
            begins = starts[np.r_[True, ~same]] == 0
            follows = starts[1:][same] == (starts[:-1] + lengths[:-1])[same]
            if not (begins.all() and follows.all()):
                raise AssertionError(f"block {b}: the pieces of a document overlap or leave a gap")
            np.add.at(covered, docs, lengths)
        if np.any(covered != self.lengths):
            bad = int(np.flatnonzero(covered != self.lengths)[0])
            raise AssertionError(
                f"document {bad} has {int(self.lengths[bad])} tokens, the rows hold "
                f"{int(covered[bad])}"
            )
        tokens = int(self.lengths.sum())
        return {"tokens": tokens, "rows": len(self), "padding": len(self) * self.seq_len - tokens}


def document_lengths(dataset: Any) -> np.ndarray:
    """Every document's length: ``dataset.lengths`` where it has them (a Mixture's, from its
    sources' where they all have them), else measured once."""
    if isinstance(dataset, Mixture):
        per_source = [getattr(source, "lengths", None) for source in dataset.sources.values()]
        if all(lengths is not None for lengths in per_source):
            sources, inner = dataset.locate_many(np.arange(len(dataset)))
            out = np.empty(len(dataset), dtype=np.int64)
            for number, lengths in enumerate(per_source):
                at = sources == number
                out[at] = np.asarray(lengths, dtype=np.int64)[inner[at]]
            return out
    else:
        lengths = getattr(dataset, "lengths", None)
        if lengths is not None:
            return np.asarray(lengths, dtype=np.int64)
    return np.array([len(dataset[i]) for i in range(len(dataset))], dtype=np.int64)
