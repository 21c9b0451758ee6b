"""A one-line progress bar on stderr (redrawn in place on a terminal, summarised otherwise)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``update(done, note)``; ``close()`` ends the line. Redraws at most ten times a second."""

    def __init__(self, label: str, total: int | None, stream: TextIO | None = None) -> None:
        self.label, self.total = label, total
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self._drawn_at = 0.0
        self._line = ""

    def update(self, done: int, note: str = "") -> None:
        if self.total:
            filled = int(24 * min(done, self.total) / self.total)
            bar = f"[{'#' * filled}{'.' * (24 - filled)}] {done}/{self.total}"
        else:
            bar = f"{done}"
        self._line = f"{self.label} {bar} {note}".rstrip()
        now = time.monotonic()
        if self.live and now - self._drawn_at >= 0.1:
            self.stream.write("\r\033[K" + self._line)
            self.stream.flush()
            self._drawn_at = now

    def close(self) -> None:
        if self.live:
            self.stream.write("\r\033[K")
        if self._line:
            self.stream.write(self._line + "\n")
        self.stream.flush()
