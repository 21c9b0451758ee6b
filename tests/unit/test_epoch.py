"""The rules of an epoch, driven by a scripted transport: no process, no thread, no timing.

Each test scripts what "arrives" at each wait (results in any order, failures, deaths,
nothing at all) and checks what the iterator hands out, in which order, and what it asks of
the transport (restarts, shutdown). The 200-run statistical crash matrix with real processes
stays as a long proof (tests/integration/test_crash_matrix.py, -m slow).
"""

from __future__ import annotations

import collections
import signal
import warnings
from typing import Any

import numpy as np
import pytest

import flowloader as fl
from flowloader._iter.events import (
    Emptied,
    Failed,
    Loaded,
    StreamEnded,
    WorkerDied,
)
from flowloader._iter.iterator import DataLoaderIterator
from flowloader._skip import SkippedSample
from flowloader.errors import LoaderTimeoutError, WorkerCrashedError

PID = 4242
KILLED = "killed by signal SIGKILL"


class Numbers(fl.Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


class Stream(fl.IterableDataset):
    def __iter__(self):
        return iter(range(100))


class Scripted:
    """A transport whose arrivals follow a script. Each step is what one wait receives: a
    task id (its batch arrives: the indices themselves), ("fail", task), ("empty", task),
    ("end", task) for a stream that ran dry, ("die", worker), or "stall" (nothing, ever
    after). Once the script is used up, every task still pending arrives, newest first."""

    prefetches = True
    worker_method = "scripted"

    def __init__(self, script: list[list[Any]]) -> None:
        self.script = collections.deque(script)
        self.pending: dict[int, Any] = {}  # task id -> assignment, not yet answered
        self.sent: list[Any] = []
        self.restarted: list[int] = []
        self.closed = False
        self.stalled = False
        self.lost: list[int] = []
        self.next_task_at_death = -1
        self.restart_error: BaseException | None = None  # what restart() raises, if anything

    def __call__(self, plan: Any, base_seed: int) -> Scripted:
        return self

    def send(self, assignments: list[Any]) -> None:
        assert not self.closed, "sent to a closed transport"
        for a in assignments:
            self.pending[a.task_id] = a
            self.sent.append(a)

    def receive(self, timeout: float | None) -> list[Any]:
        if self.stalled:
            return []
        if not self.script:
            return [self._arrive(t) for t in sorted(self.pending, reverse=True)]
        step = self.script.popleft()
        if step == "stall":
            self.stalled = True
            return []
        return [self._event(item) for item in step]

    def _arrive(self, task_id: int) -> Loaded:
        a = self.pending.pop(task_id)
        return Loaded(task_id, a.worker_id, list(a.indices))

    def _event(self, item: Any) -> Any:
        if isinstance(item, int):
            return self._arrive(item)
        kind, number = item
        if kind == "die":  # what it held will never come
            self.lost = sorted(t for t, a in self.pending.items() if a.worker_id == number)
            for task_id in self.lost:
                del self.pending[task_id]
            self.next_task_at_death = max(a.task_id for a in self.sent) + 1
            return WorkerDied(number, PID, KILLED, signal.SIGKILL)
        a = self.pending.pop(number)
        if kind == "fail":
            return Failed(number, a.worker_id, ValueError(f"bad batch {list(a.indices)}"))
        if kind == "empty":
            skipped = tuple(SkippedSample(i, None, "ValueError: bad") for i in a.indices)
            return Emptied(number, a.worker_id, skipped)
        assert kind == "end"
        return StreamEnded(number, a.worker_id)

    def restart(self, worker_id: int) -> None:
        if self.restart_error is not None:
            raise self.restart_error
        self.restarted.append(worker_id)

    def new_epoch(self) -> None:
        self.pending.clear()

    def stage_readings(self) -> None:
        return None

    def shutdown(self, grace_s: float | None = None) -> None:
        self.closed = True


def run(transport: Scripted, n: int = 12, workers: int = 2, **options: Any) -> DataLoaderIterator:
    loader = fl.DataLoader(Numbers(n), batch_size=2, num_workers=workers, **options)
    return DataLoaderIterator(loader._plan_snapshot(), None, make_transport=transport)


def batches(n: int = 12) -> list[list[int]]:
    return [[i, i + 1] for i in range(0, n, 2)]


def drain(iterator: DataLoaderIterator, into: list | None = None) -> list[Any]:
    """Every batch as a list, appended to ``into`` as they come (kept if the epoch raises)."""
    into = [] if into is None else into
    for batch in iterator:
        into.append(list(batch))
    return into


def test_batches_come_out_in_sampler_order_whatever_the_arrival_order() -> None:
    transport = Scripted([[3, 1], [2], [0]])
    assert drain(run(transport)) == batches()
    # Round-robin within the budget (prefetch_factor 2 x 2 workers), refilled as they go.
    assert [a.worker_id for a in transport.sent] == [0, 1, 0, 1, 0, 1]
    assert transport.closed


def test_in_order_false_hands_batches_out_as_they_arrive() -> None:
    transport = Scripted([[3], [1], [0, 2]])
    assert drain(run(transport, in_order=False))[:4] == [[6, 7], [2, 3], [0, 1], [4, 5]]


def test_a_failure_is_raised_in_its_place_and_the_epoch_goes_on() -> None:
    iterator = run(Scripted([[2, ("fail", 1), 0]]))
    assert list(next(iterator)) == [0, 1]
    with pytest.raises(ValueError, match=r"bad batch \[2, 3\]"):
        next(iterator)
    assert drain(iterator) == batches()[2:]


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("arrived", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("dying", [0, 1])
def test_a_death_surfaces_after_every_batch_before_its_first_lost_one(
    workers: int, arrived: int, dying: int
) -> None:
    """The crash matrix, deterministically: ``arrived`` results in sampler order, then a
    worker dies. What it held is lost; everything before it comes out, then the error."""
    transport = Scripted([[t] for t in range(arrived)] + [[("die", dying)]])
    iterator = run(transport, n=24, workers=workers)
    delivered: list = []
    with pytest.raises(WorkerCrashedError) as caught:
        drain(iterator, into=delivered)
    lost = transport.lost
    first_lost = lost[0] if lost else transport.next_task_at_death
    assert delivered == batches(24)[:first_lost]
    message = str(caught.value)
    assert message.startswith(f"DataLoader worker (pid {PID}) is killed by signal: Killed. ")
    assert (
        f"DataLoader worker {dying} (pid {PID}) had {len(lost)} batch(es) in flight when it "
        f"ended ({KILLED})"
    ) in message
    assert message.count("unexpectedly") + message.count("killed by") == 2
    if lost:
        assert str(batches(24)[lost[0]]) in message
    assert transport.closed
    assert transport.restarted == []
    with pytest.raises(StopIteration):
        next(iterator)


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("arrived", [0, 1, 3])
def test_a_restarted_worker_runs_its_batches_again_and_nothing_is_lost(
    workers: int, arrived: int
) -> None:
    transport = Scripted([[t] for t in range(arrived)] + [[("die", 1)]])
    iterator = run(transport, n=24, workers=workers, max_worker_restarts=1)
    held = [a.task_id for a in transport.sent if a.worker_id == 1 and a.task_id >= arrived]
    with pytest.warns(RuntimeWarning, match=r"worker 1 \(pid 4242\).*SIGKILL.*restarting it"):
        out = drain(iterator)
    assert out == batches(24)  # each batch once, in sampler order
    assert transport.restarted == [1]
    resent = [a.task_id for a in transport.sent if a.task_id in held]
    assert resent == held + held  # the same task ids, to the same worker id, in order
    assert iterator.stats().worker_restarts == 1


def test_past_max_worker_restarts_the_crash_error_stands() -> None:
    transport = Scripted([[("die", 0)], [("die", 1)]])
    iterator = run(transport, max_worker_restarts=1)
    with pytest.warns(RuntimeWarning), pytest.raises(WorkerCrashedError) as caught:
        drain(iterator)
    assert "max_worker_restarts=1 were used" in str(caught.value)
    assert transport.restarted == [0]


def test_a_stream_worker_is_not_restarted() -> None:
    transport = Scripted([[("die", 0)]])
    loader = fl.DataLoader(Stream(), batch_size=2, num_workers=2, max_worker_restarts=3)
    iterator = DataLoaderIterator(loader._plan_snapshot(), None, make_transport=transport)
    with pytest.raises(WorkerCrashedError, match="IterableDataset's worker is not restarted"):
        drain(iterator)
    assert transport.restarted == []


def test_a_stall_past_the_timeout_names_what_is_pending_and_stops_the_workers() -> None:
    transport = Scripted([[0], "stall"])
    iterator = run(transport, timeout=0.01)
    assert list(next(iterator)) == [0, 1]
    with pytest.raises(
        LoaderTimeoutError,
        match=r"0.01 seconds.*\{0: \[\[4, 5\], \[8, 9\]\], 1: \[\[2, 3\], \[6, 7\]\]\}",
    ):
        next(iterator)
    assert transport.closed


def test_a_batch_all_skipped_is_passed_over_and_counts_for_resuming() -> None:
    transport = Scripted([[("empty", 1), 0]])
    iterator = run(transport, skip_errors=ValueError)
    with pytest.warns(fl.errors.SkippedSampleWarning):
        first_two = [list(next(iterator)) for _ in range(2)]
    assert first_two == [[0, 1], [4, 5]]
    assert iterator.state_dict()["batches_yielded"] == 3
    assert [s.index for s in iterator.stats().skipped] == [2, 3]


def test_a_stream_that_ran_dry_gets_no_more_tasks() -> None:
    transport = Scripted([[("end", 0), 1]])
    loader = fl.DataLoader(Stream(), batch_size=2, num_workers=2)
    iterator = DataLoaderIterator(loader._plan_snapshot(), None, make_transport=transport)
    next(iterator)
    next(iterator)
    assert all(a.worker_id == 1 for a in transport.sent[4:])


def test_resuming_passes_over_what_was_delivered_without_loading_it() -> None:
    loader = fl.DataLoader(Numbers(12), batch_size=2, num_workers=2, shuffle=True, generator=3)
    first = DataLoaderIterator(loader._plan_snapshot(), None, make_transport=Scripted([]))
    head = [list(next(first)) for _ in range(2)]
    state = first.state_dict()
    rest = drain(first)
    loader = fl.DataLoader(Numbers(12), batch_size=2, num_workers=2, shuffle=True, generator=3)
    resumed = DataLoaderIterator(
        loader._plan_snapshot(), None, resume=state, make_transport=(transport := Scripted([]))
    )
    assert drain(resumed) == rest
    assert len(transport.sent) == len(rest)  # the two delivered batches were never sent
    assert sorted(np.concatenate(head + rest).tolist()) == list(range(12))


def test_a_restart_that_fails_makes_the_death_a_crash_in_its_place() -> None:
    transport = Scripted([[0], [("die", 1)]])
    transport.restart_error = OSError(11, "Resource temporarily unavailable")
    iterator = run(transport, max_worker_restarts=2)
    delivered: list = []
    with pytest.raises(WorkerCrashedError, match="Starting a new worker failed") as caught:
        drain(iterator, into=delivered)
    assert caught.value.__cause__ is transport.restart_error
    assert delivered == batches()[: transport.lost[0]]
    assert transport.closed
    assert iterator.stats().worker_restarts == 0


def test_a_restart_warning_raised_as_an_error_loses_nothing() -> None:
    """Under -W error the warning escapes next(); the restart has happened and the batches
    it re-sent, and every other event of the same wait, still come, each once, in order."""
    transport = Scripted([[("die", 1), 0, 2]])
    iterator = run(transport, max_worker_restarts=1)
    delivered: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning, match="restarting it"):
            drain(iterator, into=delivered)
        drain(iterator, into=delivered)
    assert delivered == batches()
    assert transport.restarted == [1]


def test_a_result_and_its_worker_s_death_in_the_same_wait_deliver_it_once() -> None:
    transport = Scripted([[1, ("die", 1)]])
    iterator = run(transport, max_worker_restarts=1)
    with pytest.warns(RuntimeWarning, match="restarting it"):
        assert drain(iterator) == batches()
    resent = [a.task_id for a in transport.sent].count(1)
    assert resent == 1  # task 1 arrived before the death: it is not loaded again
