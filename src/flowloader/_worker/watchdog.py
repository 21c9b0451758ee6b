"""ParentWatchdog: lets a worker notice that the main process is gone, so it never outlives it."""

from __future__ import annotations

import os
import time

# How long a worker that is exiting waits to see whether the main process is exiting too (a
# SIGTERM sent to the whole process group reaches both at once).
SETTLE_S = 0.05


class ParentWatchdog:
    """``parent_alive()`` turns False once the main process has exited.

    Under fork and spawn the main process is the worker's parent, and a change of parent pid
    (re-parenting to init or a subreaper) is a sure sign. Under forkserver the parent is the
    server, so the main process's pid is probed instead.
    """

    def __init__(self, main_pid: int) -> None:
        self._main_pid = main_pid
        self._is_parent = os.getppid() == main_pid

    def parent_alive(self) -> bool:
        if self._is_parent:
            return os.getppid() == self._main_pid
        try:
            os.kill(self._main_pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def settled_alive(self, settle_s: float = SETTLE_S) -> bool:
        """Whether the main process is still alive after up to ``settle_s`` of watching: for a
        worker on its way out, which must clean up alone if the main process is dying too."""
        deadline = time.monotonic() + settle_s
        while self.parent_alive():
            if time.monotonic() >= deadline:
                return True
            time.sleep(0.02)
        return False
