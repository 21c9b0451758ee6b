"""Clips of a list of files as arithmetic on their lengths, what VideoClips (lengths in
frames) and AudioClips (in samples) share: clip i is (file, first unit), a search in the
running clip counts; the order state is the files, their lengths and the clip settings."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

import flowloader as fl

T = TypeVar("T")
_KEPT = 128  # per process: what was read last about the files (indexes, decoder mappings)


class FileSpans(fl.Dataset[dict[str, Any]]):
    """Clips ``span`` units long, ``stride`` units apart in each of the files ``paths`` of
    ``lengths`` units. A subclass names its format, its unit and what a file is, and calls
    ``_count`` once it knows the lengths."""

    FORMAT = ""
    UNIT = ""  # what lengths count: "frames", "samples"
    WHAT = ""  # what a file is called in messages: "video", "audio file"
    SETTINGS = ""  # what the settings are, in order
    paths: list[str]

    def remembered(self, kind: str, file: int, read: Callable[[], T]) -> T:
        """``read()`` for file ``file``'s ``kind`` (an index, a decoder's mappings), kept for
        what this process read last: a worker reads a file's index once, not once per clip,
        and a dataset of a million files keeps at most a few hundred."""
        kept: OrderedDict[tuple[str, int], Any] = self.__dict__.setdefault("_kept", OrderedDict())
        key = (kind, file)
        if key in kept:
            kept.move_to_end(key)
            return kept[key]
        found = kept[key] = read()
        if len(kept) > _KEPT:
            kept.popitem(last=False)
        return found

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_kept": OrderedDict()}  # each process reads its own

    def _count(self, lengths: Sequence[int], span: int, stride: int, settings: list[int]) -> None:
        self.span, self.stride, self.settings = span, stride, settings
        self.lengths = np.array(lengths, dtype=np.int64)
        self.clips_per_video = (self.lengths - span) // stride + 1
        self.clip_starts = np.concatenate([[0], np.cumsum(self.clips_per_video)])

    def __len__(self) -> int:
        return int(self.clip_starts[-1])

    def locate(self, index: int) -> tuple[int, int]:
        """(file, first unit) of clip ``index``."""
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"clip {index} is out of range for {n} clips")
        index %= n
        file = int(np.searchsorted(self.clip_starts, index, side="right")) - 1
        return file, int(index - self.clip_starts[file]) * self.stride

    def path(self, index: int) -> str:
        """The file clip ``index`` is cut from (what ``skip_errors`` records of a clip that
        fails)."""
        return self.paths[self.locate(index)[0]]

    def changed_length(self, file: int, length: int) -> str | None:
        """Why file ``file`` with ``length`` units now cannot be read (None when it can)."""
        if length == self.lengths[file]:
            return None
        return (
            f"{self.paths[file]}: {length} {self.UNIT} now, {self.lengths[file]} when the "
            "dataset was made (the file changed)"
        )

    # -- the resume contract (docs/design/resume.md) ------------------------------------------

    def order_state(self) -> dict[str, Any]:
        """The files, their lengths and the clip settings: what decides clip i."""
        return {
            "format": self.FORMAT,
            "files": self.paths,
            "lengths": self.lengths.tolist(),
            "settings": self.settings,
        }

    def order_changes(self, saved: dict[str, Any], read: Any) -> list[str]:
        """The files holding clips below the prefix read (every file, without one) must be
        the same and as long, under the same clip settings; later files may change."""
        now = self.order_state()
        if not isinstance(saved, dict) or saved.get("format") != now["format"]:
            return [f"the state does not describe a {self.FORMAT}"]
        if saved["settings"] != now["settings"]:
            settings = f"clip settings ({self.SETTINGS})"
            return [f"{settings} were {saved['settings']}, now {now['settings']}"]
        return fl.order.files_changed(
            (saved["files"], saved["lengths"]),
            (now["files"], now["lengths"]),
            read,
            items=lambda length: max((length - self.span) // self.stride + 1, 0),
            what=self.WHAT,
            unit=self.UNIT,
        )
