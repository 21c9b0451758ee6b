"""MixturePlan: mixture position -> (source, index in that source), as arithmetic.

Stage k covers the positions from its start to the next stage's; within it, the stage's
Interleave says which source takes each position and how many that source took before it in
the stage. Adding what each source had drawn when the stage began gives the source's draw
number d. Each epoch of the mixture continues every source's draws where the one before
stopped (epoch e adds e times what one epoch draws of the source), so a big source moves on
and a small one starts a new pass. Draw d is pass ``d // len(source)``, sample
``d % len(source)`` of that pass, through the pass's keyed permutation when shuffling.
Nothing is stored per sample: a plan holds one tree per stage and the sources' draw counts at
each stage's start.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..permutation import name_hash, pass_keys, permute
from .interleave import Interleave
from .schedule import Stage

STOPPING = ("first_exhausted", "all_exhausted", "never")


class MixturePlan:
    """The arithmetic of one Mixture (see the module's docstring)."""

    def __init__(
        self,
        names: Sequence[str],
        lengths: Sequence[int],
        stages: Sequence[Stage],
        *,
        seed: int,
        shuffle: bool,
        stopping: str,
        num_samples: int | None,
    ) -> None:
        self.names, self.lengths, self.stages = tuple(names), tuple(lengths), tuple(stages)
        self.seed, self.shuffle = seed, shuffle
        self._name_hashes = np.array([name_hash(name) for name in self.names], dtype=np.uint64)
        self.trees = tuple(Interleave.build(list(stage.units), list(names)) for stage in stages)
        self.starts = np.array([stage.start for stage in stages], dtype=np.int64)
        # drawn[k, s]: how many samples source s gave before stage k began
        self.drawn = np.zeros((len(stages), len(names)), dtype=np.int64)
        for k in range(1, len(stages)):
            self.drawn[k] = self.drawn[k - 1]
            for s, count in (
                self.trees[k - 1].counts(int(self.starts[k] - self.starts[k - 1])).items()
            ):
                self.drawn[k, s] += count
        self.length = self._length(stopping, num_samples)
        # each source's draws in one epoch: where epoch e begins
        self.per_epoch = self.counts(self.length)

    # -- how long the mixture is ------------------------------------------------------------

    def position_of(self, source: int, d: int) -> int | None:
        """The mixture position of source ``source``'s draw number ``d`` (0-based); None if it
        never comes (the source's weight is 0 in the last stage, and it had fewer draws).
        Exact for any d (Python integers): lengths ask for far draws of tiny weights."""
        k = int(np.searchsorted(self.drawn[:, source], d, side="right")) - 1
        if self.stages[k].units[source] == 0:  # (then k is the last stage: never made)
            return None
        within = d - int(self.drawn[k, source])
        return int(self.starts[k]) + self.trees[k].position_of(source, within)

    def positions_of(self, source: int, draws: np.ndarray) -> np.ndarray:
        """``position_of`` for many draws of one source at once (-1 for those never made)."""
        # The stage of each draw: the last one whose start had fewer draws of this source.
        # (If the source has no weight in that stage, it is the last stage: never made.)
        stage_of = np.searchsorted(self.drawn[:, source], draws, side="right") - 1
        positions = np.full(len(draws), -1, dtype=np.int64)
        for k in np.unique(stage_of).tolist():
            if self.stages[k].units[source] == 0:
                continue
            at = np.flatnonzero(stage_of == k)
            within = draws[at] - self.drawn[k, source]
            positions[at] = self.starts[k] + self.trees[k].positions_of(source, within)
        return positions

    def _length(self, stopping: str, num_samples: int | None) -> int:
        if stopping == "never":
            assert num_samples is not None
            return num_samples
        if stopping == "first_exhausted":
            # the first position at which some source would begin its second pass
            ends = [self.position_of(s, n) for s, n in enumerate(self.lengths)]
            length = min(e for e in ends if e is not None)  # the last stage has a weighted source
        else:
            lasts = []
            for s, n in enumerate(self.lengths):
                if n == 0:  # an empty source (with no weight: Mixture checks) is read whole
                    continue
                last = self.position_of(s, n - 1)
                if last is None:
                    raise ValueError(
                        f"stopping='all_exhausted': source {self.names[s]!r} is never read to its "
                        "end (its weight is 0 in the last stage); give it a weight there, or use "
                        "stopping='never' with num_samples="
                    )
                lasts.append(last)
            length = max(lasts, default=-1) + 1
        return length if num_samples is None else min(length, num_samples)

    # -- where positions come from ----------------------------------------------------------

    def draws(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(source, draw number) for each position."""
        sources = np.empty(len(positions), dtype=np.int64)
        draws = np.empty(len(positions), dtype=np.int64)
        stage_of = np.searchsorted(self.starts, positions, side="right") - 1
        for k in np.unique(stage_of):
            at = np.flatnonzero(stage_of == k) if len(self.stages) > 1 else slice(None)
            s, rank = self.trees[k].locate(positions[at] - self.starts[k])
            sources[at] = s
            draws[at] = rank + self.drawn[k, s]
        return sources, draws

    def locate(self, positions: np.ndarray, epoch: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(source, index in that source) for each position (in range) in epoch ``epoch``."""
        sources, draws = self.draws(positions)
        if epoch:
            draws += epoch * self.per_epoch[sources]
        lengths = np.asarray(self.lengths, dtype=np.int64)[sources]
        passes, within = np.divmod(draws, lengths)
        if not self.shuffle:
            return sources, within
        keys = pass_keys(self.seed, self._name_hashes[sources], passes)
        return sources, permute(within, lengths, keys)

    def counts(self, n: int) -> np.ndarray:
        """How many of the first ``n`` positions each source took."""
        k = int(np.searchsorted(self.starts, n, side="right") - 1)
        out = self.drawn[k].copy()
        for s, count in self.trees[k].counts(n - int(self.starts[k])).items():
            out[s] += count
        return out
