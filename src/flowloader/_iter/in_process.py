"""In-process loading (``num_workers=0``): each assignment is fetched and collated in the
calling thread when the iterator waits for it, so nothing is loaded ahead of ``next``."""

from __future__ import annotations

from typing import Any

from .. import stats
from .._fetch import EmptyBatch, make_fetcher, stop_in_map_style
from .._plan import LoadPlan
from ..errors import failed_sample
from ..randomness import SampleSeeds
from .events import Assignment, Emptied, Event, Failed, Loaded, StreamEnded


class InProcessTransport:
    prefetches = False
    worker_method = ""

    def __init__(self, plan: LoadPlan) -> None:
        self._fetcher = make_fetcher(
            plan.dataset,
            plan.iterable,
            plan.auto_collation,
            plan.collate_to_run,
            plan.drop_last,
            plan.skip_errors,
        )
        self._iterable = plan.iterable
        self._clock = stats.StageClock()
        self._queued: list[Assignment] = []
        self._seeds: SampleSeeds | None = None

    def send(self, assignments: list[Assignment]) -> None:
        self._queued.extend(assignments)

    def receive(self, timeout: float | None) -> list[Event]:
        queued, self._queued = self._queued, []
        return [self._load(assignment) for assignment in queued]

    def _load(self, assignment: Assignment) -> Event:
        seeds = self._seeds
        if seeds is None or seeds.epoch_seed != assignment.epoch_seed:
            seeds = self._seeds = SampleSeeds(assignment.epoch_seed)
        task_id = assignment.task_id
        previous = stats.set_clock(self._clock if stats.enabled else None)
        try:
            batch: Any = self._fetcher.fetch(assignment.indices, seeds, None, assignment.batch)
        except StopIteration as error:
            if self._iterable:
                return StreamEnded(task_id, 0)
            return Failed(task_id, 0, stop_in_map_style(error))
        except EmptyBatch:
            return Emptied(task_id, 0, tuple(self._fetcher.skipped))
        except Exception as error:  # raised as it is, in its batch's place
            _say_where(error, assignment.indices)
            return Failed(task_id, 0, error)
        finally:
            stats.set_clock(previous)
        fetched, self._clock.marks = self._clock.marks, None
        # The task starts and ends with the fetch and the collate.
        marks = None if fetched is None else (fetched[0], fetched[2], *fetched)
        return Loaded(task_id, 0, batch, tuple(self._fetcher.skipped), marks=marks)

    def restart(self, worker_id: int) -> None:
        raise AssertionError("in-process loading has no worker to restart")

    def new_epoch(self) -> None:
        self._queued.clear()

    def stage_readings(self) -> dict[str, float] | None:
        readings = self._clock.take()  # folded in lazily: nothing per batch
        readings["task"] = readings["fetch"] + readings["collate"]
        return readings

    def shutdown(self, grace_s: float | None = None) -> None:
        self._queued.clear()


def _say_where(error: BaseException, indices: Any) -> None:
    """Add to the error's traceback (a note, Python 3.11 on) which sample raised it, where the
    loader knows, and the batch's indices: the error itself is raised as it is."""
    add_note = getattr(error, "add_note", None)
    if callable(add_note):
        sample = failed_sample(error)
        by = f" by {sample}" if sample else ""
        add_note(f"flowloader.DataLoader: raised{by} loading dataset indices {indices!r}")
