"""ParentWatchdog: lets a worker notice that the main process is gone, so it never outlives it."""

from __future__ import annotations

import os


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
