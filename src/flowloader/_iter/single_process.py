"""Loading in the calling process: sampler -> fetch -> collate, one batch per ``next``."""

from __future__ import annotations

from typing import Any

from .. import stats
from .._fetch import EmptyBatch, make_fetcher
from .._plan import LoadPlan
from .base import BaseIterator


class SingleProcessIterator(BaseIterator):
    """The num_workers=0 iterator."""

    def __init__(
        self,
        plan: LoadPlan,
        length_hint: int | None,
        epoch: int = 0,
        resume: dict[str, Any] | None = None,
    ) -> None:
        if plan.timeout != 0:
            # PyTorch refuses this combination at iter() with the same exception type.
            raise AssertionError(
                f"timeout={plan.timeout} only applies to worker processes; "
                "use timeout=0 with num_workers=0"
            )
        super().__init__(plan, length_hint, epoch, resume)
        saved = resume.get("dataset") if resume is not None else None
        if saved is not None and callable(getattr(plan.dataset, "load_state_dict", None)):
            # The stream restores its own position, before iter() starts it: no fast-forward.
            plan.dataset.load_state_dict(saved)
            self._skip_batches = 0
        self._fetcher = make_fetcher(
            plan.dataset,
            plan.iterable,
            plan.auto_collation,
            plan.collate_fn,
            plan.drop_last,
            plan.skip_errors,
        )
        self._clock = stats.StageClock()

    def _next_data(self, wait: bool = True) -> Any:
        while True:
            index = self._next_index()
            try:
                batch = self._fetch(index)
            except EmptyBatch:  # every sample skipped: account, and go on to the next batch
                self._account(index, self._fetcher.skipped, empty=True)
                continue
            self._account(index, self._fetcher.skipped)
            return batch

    def _fetch(self, index: Any) -> Any:
        previous = stats.set_clock(self._clock if stats.enabled else None)
        try:
            return self._fetcher.fetch(index, self._seeds)
        finally:
            stats.set_clock(previous)

    def stats(self) -> stats.LoaderStats:
        readings = self._clock.take()  # folded in lazily: nothing per batch
        readings["task"] = readings["fetch"] + readings["collate"]
        self._absorb_stages(readings)
        return super().stats()
