"""The loader's recent history as a Chrome trace: ``iterator.stats().write_trace(path)``.

The JSON is the Trace Event Format that torch.profiler exports and Perfetto and
chrome://tracing open, so a loader's trace and a training step's profile can be opened side
by side. Times are microseconds since the Unix epoch.

What is kept is a ring of the last ``flowloader.stats.trace_batches`` batches (0: nothing
is recorded): for each, its worker's spans (the task; in it, the fetch with the transforms'
summed time, the collate and the hand-over), and the training loop's wait for it. Workers
stamp their spans with ``time.perf_counter`` (the system's monotonic clock on Linux, shared
by every process on the machine); the main process turns them into wall-clock times when it
writes (a float64 holds microseconds since 1970 to about a quarter of a microsecond). Tuning
changes are instant events.
"""

from __future__ import annotations

import collections
import json
import os
import time
from typing import Any

__all__ = ["Timeline"]

_LOOP, _LOADING_IN_LOOP = 0, 1  # the trace's thread ids for the loop's own tracks


class Timeline:
    """A ring of the last ``batches`` batches' spans, for one iterator (across its epochs
    and its tuning changes)."""

    def __init__(self, batches: int) -> None:
        self._tasks: collections.deque[tuple[Any, ...]] = collections.deque(maxlen=batches)
        self._waits: collections.deque[tuple[Any, ...]] = collections.deque(maxlen=batches)
        self._instants: collections.deque[tuple[Any, ...]] = collections.deque(maxlen=batches)
        self._part = (0, 0, "")  # (epoch, batch number of task 0, worker method)

    def part(self, epoch: int, first_batch: int, worker_method: str) -> None:
        """Task ids from now on count from 0 at batch ``first_batch`` of ``epoch`` (a new
        epoch, or the same one resumed on other workers)."""
        self._part = (epoch, first_batch, worker_method)

    def loaded(
        self, task_id: int, worker_id: int, marks: tuple[float, ...], received: float
    ) -> None:
        """A worker's batch arrived at ``received`` (perf_counter), with its marks
        (messages.Result.marks)."""
        self._tasks.append((self._part, task_id, worker_id, marks, received))

    def waited(self, task_id: int, start: float, end: float) -> None:
        """The loop waited from ``start`` to ``end`` for task ``task_id``'s batch."""
        self._waits.append((self._part, task_id, start, end))

    def instant(self, at: float, name: str, args: dict[str, Any]) -> None:
        """Something that happened at ``at`` (perf_counter): a tuning change."""
        self._instants.append((at, name, args))

    # -- writing -------------------------------------------------------------------------

    def events(self) -> list[dict[str, Any]]:
        """The trace's events (metadata naming the tracks first)."""
        shift = time.time() - time.perf_counter()  # perf_counter seconds -> Unix seconds
        pid = os.getpid()
        tracks: dict[tuple[str, int], int] = {}
        spans: list[dict[str, Any]] = []

        def span(name: str, tid: int, start: float, end: float, args: dict[str, Any]) -> None:
            # Both ends from the same rounding, so that spans meeting at one mark still meet.
            ts = _us(start + shift)
            spans.append(
                {
                    "name": name,
                    "cat": "flowloader",
                    "ph": "X",
                    "ts": ts,
                    "dur": max(_us(end + shift) - ts, 0.0),
                    "pid": pid,
                    "tid": tid,
                    "args": args,
                }
            )

        for (epoch, first, method), task_id, worker_id, marks, received in list(self._tasks):
            key = (method, worker_id if method else 0)
            tid = tracks.setdefault(key, _LOADING_IN_LOOP if not method else 10 + len(tracks))
            batch = {"epoch": epoch, "batch": first + task_id}
            started, sent = marks[0], marks[1]
            span(f"batch {first + task_id}", tid, started, sent, batch)
            if len(marks) == 6:
                fetch_start, fetched, collated, transform = marks[2:]
                span("fetch", tid, fetch_start, fetched, {**batch, "transform_ms": _ms(transform)})
                if transform > 0:
                    end = fetch_start + min(transform, fetched - fetch_start)
                    span("transform (summed over samples)", tid, fetch_start, end, batch)
                span("collate", tid, fetched, collated, batch)
                if method:  # a worker's: into shared memory or a queue, and sent
                    arrived = {**batch, "arrived_ms_after": _ms(received - sent)}
                    span("hand-over", tid, collated, sent, arrived)
        for (epoch, first, _), task_id, start, end in list(self._waits):
            span("wait for data", _LOOP, start, end, {"epoch": epoch, "batch": first + task_id})
        instants = [
            {
                "name": name,
                "cat": "flowloader",
                "ph": "i",
                "s": "p",
                "ts": _us(at + shift),
                "pid": pid,
                "tid": _LOOP,
                "args": args,
            }
            for at, name, args in list(self._instants)
        ]
        names = {_LOOP: "training loop"}
        for (method, worker_id), tid in tracks.items():
            names[tid] = f"worker {worker_id} ({method})" if method else "loading, in the loop"
        meta = [_meta("process_name", pid, 0, "flowloader")]
        meta += [_meta("thread_name", pid, tid, name) for tid, name in sorted(names.items())]
        return meta + sorted(spans, key=lambda e: (e["tid"], e["ts"], -e["dur"])) + instants

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the trace to ``path`` as JSON (open it in Perfetto or chrome://tracing)."""
        trace = {"traceEvents": self.events(), "displayTimeUnit": "ms"}
        with open(path, "w", encoding="utf-8") as file:
            json.dump(trace, file)


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 3)


def _ms(seconds: float) -> float:
    return round(seconds * 1e3, 3)


def _meta(kind: str, pid: int, tid: int, name: str) -> dict[str, Any]:
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
