"""What the leak guards (conftest.py) look at after each test: worker processes, /dev/shm
segments (and, for tests/integration/, descriptors) left behind.

They look first without the garbage collector, as a user's program runs: what only a
collection frees was kept alive by a reference cycle. Those tests are listed at the end of
the run (a cycle of the test's own making, such as ``pytest.raises(...) as caught`` around a
loader, is expected; the loader's own cycles are not, see test_error_cleanup.py).
"""

from __future__ import annotations

import gc
import multiprocessing
import time
from collections.abc import Callable
from typing import Any

from flowloader._ipc import shm

# Without collecting (a loader that is stopping on its own), then collecting, up to:
UNCOLLECTED_GRACE_S = 1.0
COLLECTED_GRACE_S = 5.0

needed_collection: list[str] = []


def workers_and_segments() -> dict[str, Any]:
    return {
        "worker processes left running": [
            p for p in multiprocessing.active_children() if p.name.startswith("flowloader")
        ],
        f"shared-memory segments left in {shm.shm_dir()}": shm.list_segments(shm.process_prefix()),
    }


def check_nothing_left(test: str, look: Callable[[], dict[str, Any]]) -> None:
    """Fail if ``look()`` still finds something once the grace periods are over; note the
    test if only the garbage collector freed what it found."""
    found = _settle(look, UNCOLLECTED_GRACE_S, collect=False)
    if any(found.values()):
        found = _settle(look, COLLECTED_GRACE_S, collect=True)
        if not any(found.values()):
            needed_collection.append(test)
    for what, items in found.items():
        assert not items, f"{what}: {items}"


def _settle(look: Callable[[], dict[str, Any]], grace_s: float, collect: bool) -> dict[str, Any]:
    deadline = time.monotonic() + grace_s
    while True:
        if collect:
            gc.collect()
        found = look()
        if not any(found.values()) or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def write_summary(reporter: Any) -> None:
    if needed_collection:
        reporter.write_sep("-", "tests whose workers only the garbage collector stopped")
        reporter.write_line(
            f"{len(needed_collection)} test(s) kept a loader in a reference cycle (expected "
            "only where the test itself holds an exception, e.g. pytest.raises(...) as caught):"
        )
        for test in needed_collection:
            reporter.write_line(f"  {test}")
