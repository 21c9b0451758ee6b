"""A one-line progress bar on stderr (redrawn in place on a terminal, summarised otherwise)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``update(done, note)``; ``close()`` ends the line. ``unit`` names what ``done`` counts,
    so that every number on the line says what it is. Redraws at most ten times a second."""

    def __init__(
        self, label: str, total: int | None, unit: str, stream: TextIO | None = None
    ) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self._drawn_at = 0.0
        self._line = ""

    def update(self, done: int, note: str = "") -> None:
        """``done`` of ``total`` so far; ``note`` (already labelled) follows after a comma."""
        if self.total:
            filled = int(24 * min(done, self.total) / self.total)
            count = f"[{'#' * filled}{'.' * (24 - filled)}] {done:,}/{self.total:,} {self.unit}"
        else:
            count = f"{done:,} {self.unit}"
        self._line = f"{self.label}: {count}" + (f", {note}" if note else "")
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
