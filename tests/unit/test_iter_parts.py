"""Main-process pieces without processes: dispatcher, reorder buffer, exit descriptions."""

from __future__ import annotations

import os
import signal

from flowloader._iter.dispatcher import Dispatcher
from flowloader._iter.lifecycle import describe_exit
from flowloader._iter.reorder import ReorderBuffer
from flowloader._worker.watchdog import ParentWatchdog


def test_dispatcher_round_robin_within_budget() -> None:
    dispatcher = Dispatcher(num_workers=3, budget=4)
    assigned = []
    while dispatcher.has_room():
        worker = dispatcher.next_worker()
        assigned.append((dispatcher.assign(worker, [len(assigned)]), worker))
    assert assigned == [(0, 0), (1, 1), (2, 2), (3, 0)]
    assert dispatcher.complete(1) == (1, [1])
    assert dispatcher.next_worker() == 1
    assert dispatcher.pending() == [[0], [2], [3]]
    assert dispatcher.pending(0) == [[0], [3]]


def test_dispatcher_skips_inactive_workers() -> None:
    dispatcher = Dispatcher(num_workers=2, budget=10)
    dispatcher.deactivate(0)
    assert dispatcher.next_worker() == 1
    dispatcher.deactivate(1)
    assert dispatcher.next_worker() is None
    dispatcher.reset()
    assert dispatcher.next_worker() == 0
    assert dispatcher.idle()


def test_reorder_in_order_waits_and_skips() -> None:
    buffer = ReorderBuffer(in_order=True)
    buffer.add(1, "b")
    assert buffer.pop() == (False, None)
    buffer.skip(0)
    assert buffer.pop() == (True, "b")
    buffer.add(3, "d")
    buffer.add(2, "c")
    assert [buffer.pop(), buffer.pop(), buffer.pop()] == [(True, "c"), (True, "d"), (False, None)]


def test_reorder_as_ready() -> None:
    buffer = ReorderBuffer(in_order=False)
    buffer.add(5, "x")
    buffer.add(2, "y")
    assert [buffer.pop(), buffer.pop(), buffer.pop()] == [(True, "x"), (True, "y"), (False, None)]


def test_describe_exit() -> None:
    assert describe_exit(3) == "exit code 3"
    assert describe_exit(-signal.SIGKILL) == "killed by signal SIGKILL"
    assert describe_exit(None) == "still running"


def test_watchdog_sees_a_live_parent() -> None:
    assert ParentWatchdog(os.getppid()).parent_alive()
    assert ParentWatchdog(os.getpid()).parent_alive()  # probed by pid: we are alive
    assert not ParentWatchdog(2**22 + 12345).parent_alive()
