"""Packed: a map-style dataset of rows of ``seq_len`` tokens packed from documents.

Documents are taken in the order the dataset gives them (shuffle them with a Mixture's
per-source shuffle, or pass ``shuffle=True``: a new order each epoch, which the DataLoader
hands to every worker), ``block`` at a time, and
each block is packed on its own (packing.py). So row r is a pure function of its block's
documents: rows are map-style, the same for any num_workers, and a resume is a position.
Building a Packed packs every block once (lengths only, no token read) to count its rows; a
block's plan is computed again where a row of it is read, and kept (a few blocks per process).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..batching import fetch_many
from ..dataset import Dataset
from ..order import Read, epoch_of, hand_epoch, order_changes, order_state
from ..permutation import name_hash, pass_keys, permute
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
    ``shuffle``: documents in a seeded order per epoch, as a sampler's. The epoch is the
    DataLoader's (it calls ``set_epoch`` here and in every worker; calling it yourself works
    too), and it is passed on to ``dataset`` (a Mixture's sources move on each epoch).
    """

    def __init__(
        self,
        dataset: Any,
        seq_len: int,
        *,
        block: int = 4096,
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
        self.shuffle, self.seed = shuffle, seed
        self.epoch = epoch_of(dataset) or 0
        self.lengths = document_lengths(dataset)
        if not len(self.lengths):
            raise ValueError("Packed needs at least one document")
        self._plans: collections.OrderedDict[int, BlockPlan] = collections.OrderedDict()
        self._plans_lock = threading.Lock()  # thread workers may share this object
        self._check_pad_id()
        self._count_rows()

    def __getstate__(self) -> dict[str, Any]:
        """Each copy its own plan cache (and lock): thread workers get shallow copies."""
        return {**self.__dict__, "_plans": collections.OrderedDict(), "_plans_lock": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._plans_lock = threading.Lock()

    def _check_pad_id(self) -> None:
        """``pad_id`` must be a token the documents' dtype holds (checked on the first
        document, before any worker starts)."""
        dtype = np.asarray(self.dataset[0]).dtype
        if np.issubdtype(dtype, np.integer):
            bounds = np.iinfo(dtype)
            if not bounds.min <= self.pad_id <= bounds.max:
                raise ValueError(
                    f"pad_id={self.pad_id} does not fit the documents' {dtype} token ids "
                    f"({bounds.min}..{bounds.max})"
                )

    def set_epoch(self, epoch: int) -> None:
        """Epoch ``epoch``'s rows (and their number): its document order with
        ``shuffle=True``, and the wrapped dataset's epoch where it has one. The DataLoader
        calls it in the main process and in every worker, persistent or not."""
        epoch = int(epoch)
        # None: nothing inside keeps an epoch (a Subset of token files forwards set_epoch to
        # nothing), so its documents, and their lengths, are the same every epoch
        inner_epoch = epoch_of(self.dataset)
        if epoch == self.epoch and inner_epoch in (None, epoch):
            return
        self.epoch = epoch
        if inner_epoch is not None:  # its documents follow the epoch
            hand_epoch(self.dataset, epoch)
            self.lengths = document_lengths(self.dataset)
        elif not self.shuffle:
            return  # the same documents in the same order: the same rows
        self._plans.clear()
        self._count_rows()

    # -- resuming (flowloader.order's contract) -------------------------------------------

    def order_state(self) -> dict[str, Any]:
        """What decides the rows: the packing's settings, the row count and the wrapped
        dataset's own description (a checkpoint carries it)."""
        return {
            "format": "flowloader.Packed",
            "settings": self._settings(),
            "documents": len(self.lengths),
            "rows": len(self),
            "dataset": order_state(self.dataset),
        }

    def _settings(self) -> dict[str, Any]:
        names = ("seq_len", "block", "method", "pad_id", "long_docs", "shuffle", "seed")
        return {name: getattr(self, name) for name in names}

    def order_changes(self, saved: dict[str, Any], read: Read) -> list[str]:
        """What differs in the rows ``read`` covers: the settings, the rows' existence, and
        the documents of every block those rows come from (the wrapped dataset's check, over
        them: all of them with ``shuffle=True``, where a block draws from anywhere)."""
        if not isinstance(saved, dict) or saved.get("format") != "flowloader.Packed":
            return ["the state does not describe a Packed dataset"]
        now = self._settings()
        changed = [
            f"Packed's {key} was {value!r}, now {now[key]!r}"
            for key, value in saved["settings"].items()
            if now.get(key) != value
        ]
        if changed:
            return changed
        rows = read.prefix
        if rows is None:
            if saved["rows"] != len(self) or saved["documents"] != len(self.lengths):
                changed.append(
                    f"Packed had {saved['rows']} rows of {saved['documents']} documents, now "
                    f"{len(self)} of {len(self.lengths)} (every row was, or may have been, read)"
                )
            documents = None
        else:
            if min(rows, saved["rows"]) != min(rows, len(self)):
                changed.append(
                    f"Packed had {saved['rows']} rows, now {len(self)}: the rows read reach {rows}"
                )
            documents = None if self.shuffle else self._documents_below(rows)
        inner = order_state(self.dataset)
        if inner is None:
            if saved["documents"] != len(self.lengths) and not changed:
                changed.append(
                    f"Packed's dataset had {saved['documents']} documents, now {len(self.lengths)}"
                )
            return changed
        found = order_changes(self.dataset, saved["dataset"], read.at(documents))
        return changed + [f"Packed's dataset: {difference}" for difference in found]

    def _documents_below(self, rows: int) -> int:
        """Where the documents of the blocks holding rows ``0 .. rows - 1`` end (unshuffled):
        if they are unchanged, so are those blocks and their rows."""
        if rows <= 0:
            return 0
        last = min(rows, len(self)) - 1
        b = int(np.searchsorted(self._first_row, last, side="right") - 1)
        return (b + 1) * self.block

    def _order(self, first: int, end: int) -> np.ndarray:
        """The documents at places first..end-1 of this epoch's order."""
        places = np.arange(first, end, dtype=np.int64)
        if not self.shuffle:
            return places
        n = len(self.lengths)
        stream = np.array([name_hash("packed")], np.uint64)
        keys = pass_keys(self.seed, stream, np.array([self.epoch]))
        return permute(places, np.full(len(places), n, np.int64), np.repeat(keys, len(places)))

    def _count_rows(self) -> None:
        counts = [self._plan(b, keep=False).num_rows for b in range(self.num_blocks)]
        self._first_row = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    @property
    def num_blocks(self) -> int:
        return -(-len(self.lengths) // self.block)

    def _plan(self, b: int, keep: bool = True) -> BlockPlan:
        with self._plans_lock:
            plan = self._plans.get(b)
            if plan is not None:
                self._plans.move_to_end(b)
                return plan
        docs = self._order(b * self.block, min((b + 1) * self.block, len(self.lengths)))
        plan = plan_block(docs, self.lengths[docs], self.seq_len, self.method, self.long_docs)
        if keep:
            with self._plans_lock:
                self._plans[b] = plan
                if len(self._plans) > CACHED_BLOCKS:
                    self._plans.popitem(last=False)
        return plan

    def __len__(self) -> int:
        return int(self._first_row[-1])

    def __getitem__(self, r: int) -> dict[str, np.ndarray]:
        docs, starts, lengths = self._row_pieces(r)
        parts = self._parts(docs, starts, lengths)
        row = self._empty_rows(1, parts)
        self._fill(row, 0, parts, lengths)
        return {name: column[0] for name, column in row.items()}

    def __getitems__(self, rows: Sequence[int]) -> list[dict[str, np.ndarray]]:
        """Many rows at once (a batch): their documents read in one call."""
        if not len(rows):
            return []
        pieces = [self._row_pieces(r) for r in rows]
        docs, starts, lengths = (np.concatenate(column) for column in zip(*pieces, strict=True))
        parts = self._parts(docs, starts, lengths)
        batch = self._empty_rows(len(rows), parts)
        first = 0
        for k, (row_docs, _, row_lengths) in enumerate(pieces):
            end = first + len(row_docs)
            self._fill(batch, k, parts[first:end], row_lengths)
            first = end
        return [{name: column[k] for name, column in batch.items()} for k in range(len(rows))]

    def _row_pieces(self, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(document, start, length) of the pieces of row ``r``, in document order."""
        r = int(r)
        if not 0 <= r < len(self):
            raise IndexError(f"row {r} is out of range for {len(self)} packed rows")
        b = int(np.searchsorted(self._first_row, r, side="right") - 1)
        plan = self._plan(b)
        k = r - int(self._first_row[b])
        first, end = int(plan.rows[k]), int(plan.rows[k + 1])
        return plan.docs[first:end], plan.starts[first:end], plan.lengths[first:end]

    def _parts(self, docs: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> list[Any]:
        """The pieces' tokens (a row's pieces are of distinct documents: one read each)."""
        texts = fetch_many(self.dataset, docs.tolist())
        return [
            text[s : s + n]
            for text, s, n in zip(texts, starts.tolist(), lengths.tolist(), strict=True)
        ]

    def _empty_rows(self, count: int, parts: list[Any]) -> dict[str, np.ndarray]:
        dtype = np.result_type(*parts) if parts else np.int64
        return {
            "tokens": np.full((count, self.seq_len), self.pad_id, dtype=dtype),
            "segment_ids": np.zeros((count, self.seq_len), dtype=np.int32),
            "positions": np.zeros((count, self.seq_len), dtype=np.int32),
        }

    @staticmethod
    def _fill(rows: dict[str, np.ndarray], k: int, parts: list[Any], lengths: np.ndarray) -> None:
        """Row k: its pieces one after another, numbered from 1, positions from 0 in each."""
        if not parts:
            return
        used = int(lengths.sum())
        np.concatenate(parts, out=rows["tokens"][k, :used])
        numbers = np.arange(1, len(parts) + 1, dtype=np.int32)
        rows["segment_ids"][k, :used] = np.repeat(numbers, lengths)
        ends = np.cumsum(lengths)
        rows["positions"][k, :used] = np.arange(used, dtype=np.int32) - np.repeat(
            ends - lengths, lengths
        )

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
    """Every document's length: ``dataset.lengths`` where it has them (a token file's, a
    Mixture's from its sources'), else measured once."""
    lengths = getattr(dataset, "lengths", None)
    if lengths is not None:
        return np.asarray(lengths, dtype=np.int64)
    return np.array([len(dataset[i]) for i in range(len(dataset))], dtype=np.int64)
