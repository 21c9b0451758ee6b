"""How many samples each source of a mixture has given the consumer this epoch
(``iterator.stats().sources``), for any dataset with ``names`` and ``sources_of``, counted
from the indices of the batches handed out.

The indices wait until the counts are read (or until enough of them wait), and are then
located all at once: locating is vectorised, so this costs the main process little per batch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# Batches whose indices wait before they are located together.
FOLD_EVERY = 64


class SourceCounts:
    @classmethod
    def of(cls, dataset: Any) -> SourceCounts | None:
        """Counts for a dataset that names a source per position (a Mixture: ``names`` and
        ``sources_of``), None for any other."""
        names = getattr(dataset, "names", None)
        if isinstance(names, tuple) and callable(getattr(dataset, "sources_of", None)):
            return cls(dataset)
        return None

    def __init__(self, mixture: Any) -> None:
        self._mixture = mixture
        self._totals = np.zeros(len(mixture.names), dtype=np.int64)
        self._loaded: dict[int, np.ndarray] = {}  # task id -> indices whose samples came
        self._delivered: list[np.ndarray] = []

    def loaded(self, task_id: int, indices: Any, skipped: tuple[Any, ...]) -> None:
        """A batch arrived; ``skipped`` (SkippedSample records) were dropped from it."""
        arrived = np.asarray(indices, dtype=np.int64).reshape(-1)
        if skipped:
            arrived = arrived[~np.isin(arrived, [record.index for record in skipped])]
        self._loaded[task_id] = arrived

    def delivered(self, task_id: int) -> None:
        """The batch of ``task_id`` was handed out (or passed over: then it had no sample)."""
        arrived = self._loaded.pop(task_id, None)
        if arrived is not None and arrived.size:
            self._delivered.append(arrived)
            if len(self._delivered) >= FOLD_EVERY:
                self._fold()

    def counts(self) -> dict[str, int]:
        self._fold()
        return dict(zip(self._mixture.names, self._totals.tolist(), strict=True))

    def _fold(self) -> None:
        if self._delivered:
            sources = self._mixture.sources_of(np.concatenate(self._delivered))
            self._totals += np.bincount(sources, minlength=len(self._totals))
            self._delivered.clear()
