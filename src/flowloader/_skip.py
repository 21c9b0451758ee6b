"""The bad-sample policy: which loading errors drop a sample, and how many may be dropped.

Workers (or the in-process fetcher) catch the named exception types per sample, drop the
sample from its batch and report a :class:`SkippedSample`. The main process accounts for the
reports in sampler order, so warnings, statistics and the budget check come out the same for
any ``num_workers``; past the budget it raises :class:`~flowloader.errors.TooManySkippedError`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from ._warn import warn_at_user
from .errors import SkippedSampleWarning, TooManySkippedError

# Skips warned about one by one; after that, one summary warning every SUMMARY_EVERY skips.
WARN_INDIVIDUALLY = 5
SUMMARY_EVERY = 100
# Skipped samples listed in a TooManySkippedError's message (all are in .skipped).
LISTED = 20


@dataclass(frozen=True)
class SkippedSample:
    """A sample dropped from its batch: its dataset index (None in a stream), its file where
    the dataset says, and the error."""

    index: int | None
    error: str  # "TypeName: message"
    path: str | None = None
    where: str | None = None  # for streams: which worker's stream, which item

    def describe(self) -> str:
        what = f"sample {self.index}" if self.index is not None else (self.where or "a sample")
        return f"{what}{f' ({self.path})' if self.path else ''}: {self.error}"


def check_policy(skip_errors: Any, max_skipped: Any) -> tuple[type[Exception], ...]:
    """Validate the two keyword arguments; returns the exception types as a tuple."""
    types = () if skip_errors is None else skip_errors
    if isinstance(types, type):
        types = (types,)
    if not isinstance(types, tuple) or not all(
        isinstance(t, type) and issubclass(t, Exception) for t in types
    ):
        raise TypeError(
            "skip_errors should be an Exception subclass or a tuple of them (Exception skips "
            f"every error), but got skip_errors={skip_errors!r}"
        )
    if max_skipped is not None:
        is_number = isinstance(max_skipped, (int, float)) and not isinstance(max_skipped, bool)
        if (
            not is_number
            or max_skipped < 0
            or (isinstance(max_skipped, float) and max_skipped >= 1)
        ):
            raise ValueError(
                "max_skipped should be a count (int >= 0) or a fraction of the samples seen "
                "so far (0 <= float < 1), or None for no limit, but got "
                f"max_skipped={max_skipped!r}"
            )
        if not types:
            raise ValueError("max_skipped needs skip_errors: name the errors to skip")
    return types


def skipped_from(error: BaseException, index: int | None, dataset: Any, where: str | None = None):
    """The record of ``dataset[index]`` failing with ``error``."""
    return SkippedSample(index, f"{type(error).__name__}: {error}", _path_of(dataset, index), where)


def _path_of(dataset: Any, index: int | None) -> str | None:
    """The sample's file, where the dataset tells (``path(i)``, or torchvision's ``samples``)."""
    if index is None:
        return None
    try:
        path_of = getattr(dataset, "path", None)
        if callable(path_of):
            return os.fspath(path_of(index))
        entry = dataset.samples[index]
        return os.fspath(entry[0]) if isinstance(entry, tuple) else None
    except Exception:
        return None


class SkipLedger:
    """The main process's account of skipped samples in one epoch."""

    def __init__(self, max_skipped: int | float | None) -> None:
        self.max_skipped = max_skipped
        self.skipped: list[SkippedSample] = []
        self.seen = 0

    def account(self, samples: int, skipped: tuple[SkippedSample, ...] | list) -> None:
        """``samples`` more were loaded or tried, of which ``skipped`` were dropped: warn, and
        raise TooManySkippedError past the budget."""
        self.seen += samples
        for record in skipped:
            self.skipped.append(record)
            count = len(self.skipped)
            if count <= WARN_INDIVIDUALLY:
                warn_at_user(f"DataLoader skipped {record.describe()}", SkippedSampleWarning)
            elif count % SUMMARY_EVERY == 0:
                warn_at_user(
                    f"DataLoader has skipped {count} samples of {self.seen} this epoch; the "
                    f"latest: {record.describe()} (iterator.stats().skipped lists them all)",
                    SkippedSampleWarning,
                )
        if skipped and len(self.skipped) > self.budget():
            listed = "; ".join(r.describe() for r in self.skipped[:LISTED])
            more = len(self.skipped) - LISTED
            raise TooManySkippedError(
                f"DataLoader skipped {len(self.skipped)} of {self.seen} samples, more than "
                f"max_skipped={self.max_skipped!r} allows: {listed}"
                + (f"; and {more} more" if more > 0 else ""),
                list(self.skipped),
            )

    def budget(self) -> float:
        if self.max_skipped is None:
            return math.inf
        if isinstance(self.max_skipped, float):
            return math.ceil(self.max_skipped * self.seen)
        return self.max_skipped
