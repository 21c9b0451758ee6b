"""What every DataLoader iterator shares: the index stream, the base seed, the yield count."""

from __future__ import annotations

import copy
import time
import warnings
from typing import Any

from .. import _output, _seed, _state, stats
from .._plan import LoadPlan
from .._skip import SkipLedger
from ..randomness import SampleSeeds
from .pinning import PinStage

_END = object()
NOT_READY = object()


class BaseIterator:
    """One pass over a DataLoader's data, as the plan describes it."""

    def __init__(
        self,
        plan: LoadPlan,
        length_hint: int | None,
        epoch: int = 0,
        resume: dict[str, Any] | None = None,
    ) -> None:
        self._plan = plan
        self._pin_stage: PinStage | None = None
        self._start_epoch(plan, length_hint, epoch, resume)
        pinned = _output.pins(plan.output, plan.pin_memory)
        self._convert = _output.converter(plan.output, pinned)
        if pinned and plan.num_workers > 0:  # in-process loading pins in line, as PyTorch does
            self._pin_stage = PinStage(self._convert)

    def _start_epoch(
        self,
        plan: LoadPlan,
        length_hint: int | None,
        epoch: int,
        resume: dict[str, Any] | None = None,
    ) -> None:
        self._plan = plan
        self._source_exhausted = False
        if self._pin_stage is not None:
            self._pin_stage.clear()
        skip = 0
        if resume is not None:
            _state.restore_generator(plan.generator, resume["generator"])
            if resume["sampler"] is not None:
                plan.index_sampler.load_state_dict(resume["sampler"])
            skip = resume["batches_yielded"]
            if not plan.iterable and _state.skip_in_sampler(plan.index_sampler, skip):
                skip = 0  # the sampler itself now begins after what was delivered
        # Everything this epoch's order depends on, as it is before the first draw.
        self.position = _state.Position(
            plan,
            epoch,
            generator=_state.generator_state(plan.generator),
            sampler=_state.sampler_state(plan.index_sampler),
        )
        # Drawn every epoch, with or without workers, so that the sampler's draws (which may
        # share the generator) are the same whatever num_workers and persistent_workers are.
        self._base_seed = _seed.draw_seed(plan.generator)
        self._seeds = SampleSeeds(self._base_seed)  # every sample's generator this epoch
        self._sampler_iter = iter(plan.index_sampler)
        self._skip_batches = 0
        if skip:
            self._resume_position(plan, skip)
        self._length_hint = length_hint
        self._stats = stats.LoaderStats(num_workers=plan.num_workers)
        # The skip_errors account, kept only where the policy is on (no cost otherwise).
        self._ledger = SkipLedger(plan.max_skipped) if plan.skip_errors else None
        if self._ledger is not None:
            self._stats.skipped = self._ledger.skipped
        self._started_at = time.perf_counter()
        self._cpu_at_start = time.process_time()
        self._batches = 0
        self._waited_s = 0.0

    def _resume_position(self, plan: LoadPlan, batches: int) -> None:
        """Continue after ``batches`` batches: a map-style epoch skips their indices without
        loading anything; a stream has no indices, so its batches are loaded and dropped."""
        if plan.iterable:
            self._skip_batches = batches
        else:
            for _ in range(batches):
                if next(self._sampler_iter, _END) is _END:
                    break
        self.position.batches_yielded = batches

    @property
    def exhausted(self) -> bool:
        """True once the epoch's last batch was handed out (not merely loaded)."""
        return self.position.exhausted

    def state_dict(self) -> dict[str, Any]:
        """Where this epoch stands: enough to continue it in a new loader (see DataLoader)."""
        return self.position.state()

    def stats(self) -> stats.LoaderStats:
        """Where the time went since this epoch started (see :mod:`flowloader.stats`)."""
        snapshot = copy.deepcopy(self._stats)
        snapshot.batches = self._batches
        snapshot.stage_s["wait"] = self._waited_s
        snapshot.elapsed_s = time.perf_counter() - self._started_at
        snapshot.main_cpu_s = time.process_time() - self._cpu_at_start
        snapshot.in_flight = self._in_flight()
        return snapshot

    def _in_flight(self) -> int:
        return 0

    def _absorb_stages(self, stages: dict[str, float] | None) -> None:
        """Add a process's stage clock readings (read = dataset time not marked transform)."""
        if not stages:
            return
        totals = self._stats.stage_s
        transform = stages.get("transform", 0.0)
        totals["read"] += max(stages.get("fetch", 0.0) - transform, 0.0)
        totals["transform"] += transform
        totals["collate"] += stages.get("collate", 0.0)
        totals["transport"] += stages.get("transport", 0.0)
        self._stats.worker_busy_s += stages.get("task", 0.0)

    def _count_batch(self, waited_s: float) -> None:
        self._batches += 1
        self._waited_s += waited_s
        if self._stats.first_batch_s is None:
            self._stats.first_batch_s = time.perf_counter() - self._started_at

    def __iter__(self) -> BaseIterator:
        return self

    def __len__(self) -> int:
        return len(self._plan.index_sampler)

    def __next__(self) -> Any:
        while self._skip_batches:  # resuming a stream: load and drop what was delivered
            self._skip_batches -= 1
            self._guarded_next()
        produce = self._guarded_next if self._pin_stage is None else self._next_pinned
        if not stats.enabled:
            data = produce()
        else:
            started = time.perf_counter()
            data = produce()
            self._count_batch(time.perf_counter() - started)
        self.position.batches_yielded += 1
        self._warn_if_past_reported_length()
        if self._pin_stage is not None or self._convert is None:
            return data
        return self._convert(data)

    def _guarded_next(self) -> Any:
        try:
            return self._next_data()
        except StopIteration:
            self.position.exhausted = True
            raise

    def _next_pinned(self) -> Any:
        """The oldest pinned batch. Before waiting for it, every batch that has already arrived
        goes to the pinning thread (up to its depth), so that its copy overlaps the training
        step; an error takes its batch's place in the order."""
        stage = self._pin_stage
        assert stage is not None
        wait = not stage
        while stage.has_room() and not self._source_exhausted:
            try:
                batch = self._next_data(wait=wait)
            except StopIteration:
                self._source_exhausted = True
                break
            except Exception as error:
                stage.submit_error(error)
                break
            if batch is NOT_READY:
                break
            stage.submit(batch)
            wait = False
        if not stage:
            self.position.exhausted = True
            raise StopIteration
        return stage.take()

    def _next_data(self, wait: bool = True) -> Any:
        """The next batch; with ``wait=False``, NOT_READY unless it has already arrived."""
        raise NotImplementedError

    def _next_index(self) -> Any:
        return next(self._sampler_iter)

    def _account(self, indices: Any, skipped: Any, *, empty: bool = False) -> None:
        """Count a batch's samples and its skipped ones, in sampler order (warns; raises
        TooManySkippedError past the budget). An ``empty`` batch (all its samples skipped)
        is passed over, but counts as delivered for resuming."""
        if self._ledger is not None:
            tried = len(indices) if self._plan.auto_collation else 1
            self._ledger.account(tried, skipped)
        if empty:
            self.position.batches_yielded += 1

    def _warn_if_past_reported_length(self) -> None:
        reported = self._length_hint
        yielded = self.position.batches_yielded
        if self._plan.iterable and reported is not None and yielded > reported:
            hint = (
                " With workers, each worker must read its own shard (see get_worker_info())."
                if self._plan.num_workers > 0
                else ""
            )
            warnings.warn(
                f"Length of IterableDataset {self._plan.dataset!r} was reported to be "
                f"{reported} (when accessing len(dataloader)), but {yielded} "
                f"samples have been fetched.{hint}",
                stacklevel=3,
            )

    def __getstate__(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} cannot be pickled")
