"""MixtureBatchSampler: batches each from one source of a Mixture, the sources' batches in
proportion to the weights (Energon's per-dataset batches, Mosaic's ``per_stream``).

The batches' order is a mixture of its own, one level up: a MixturePlan whose "samples" are
the sources' batches, with the Mixture's stages moved to batch boundaries, so every prefix of
every stage holds each source within 2 batches of its share. Source s's c-th batch is its next
``batch_size`` samples in the Mixture's own order: the mixture positions of its draws
c·batch_size onwards, so the loader reads them through the Mixture as any other index, with
the same samples, per-sample generators and per-source stats.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..sampler import Sampler
from .dataset import Mixture
from .plan import MixturePlan
from .schedule import Stage

# Batches located at once while iterating.
CHUNK = 1024


class MixtureBatchSampler(Sampler[list[int]]):
    """Yields lists of mixture positions, each list from one source
    (``DataLoader(mix, batch_sampler=MixtureBatchSampler(mix, batch_size))``). Without
    ``drop_last`` a source's last batch may be short; the sampler ends where the first source
    has no batch left of the samples the Mixture gives it."""

    def __init__(self, mixture: Mixture, batch_size: int, drop_last: bool = False) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(
                f"batch_size should be a positive integer value, but got batch_size={batch_size!r}"
            )
        if not isinstance(mixture, Mixture):
            raise TypeError(f"MixtureBatchSampler takes a flowloader.Mixture, not {mixture!r}")
        self.mixture, self.batch_size, self.drop_last = mixture, batch_size, drop_last
        plan = mixture._plan
        # The samples each source has in the mixture, and the batches they make.
        self._available = plan.counts(plan.length)
        rounding = math.floor if drop_last else math.ceil
        batches = [rounding(int(n) / batch_size) for n in self._available]
        self._batches = MixturePlan(
            plan.names,
            batches,
            _at_batch_boundaries(plan.stages, batch_size),
            seed=0,
            shuffle=False,
            stopping="first_exhausted",
            num_samples=None,
        )
        self.start = 0  # the batch this pass begins at (a resume); set_epoch-free: one order

    def __len__(self) -> int:
        return self._batches.length - self.start

    def __iter__(self) -> Iterator[list[int]]:
        begin, self.start = self.start, 0  # a restored position holds for one pass
        for first in range(begin, self._batches.length, CHUNK):
            chunk = np.arange(first, min(first + CHUNK, self._batches.length), dtype=np.int64)
            sources, numbers = self._batches.draws(chunk)
            for source, number in zip(sources.tolist(), numbers.tolist(), strict=True):
                yield self._positions(source, number).tolist()

    def _positions(self, source: int, number: int) -> np.ndarray:
        """The mixture positions of source ``source``'s batch ``number``."""
        first = number * self.batch_size
        last = min(first + self.batch_size, int(self._available[source]))
        draws = np.arange(first, last, dtype=np.int64)
        return self.mixture._plan.positions_of(source, draws)

    # -- resuming (the loader's state_dict() holds the rest) --------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {"start": self.start, "batch_size": self.batch_size, "drop_last": self.drop_last}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in ("batch_size", "drop_last"):
            if key in state and state[key] != getattr(self, key):
                raise ValueError(
                    f"this MixtureBatchSampler state was saved with {key}={state[key]!r}, "
                    f"not {key}={getattr(self, key)!r}: its batches would be other batches"
                )
        self.start = int(state.get("start", 0))

    def restart_after(self, batches: int, regroup: bool = False) -> bool:
        """Continue after the ``batches`` batches delivered since ``start``, without
        computing them."""
        self.start += batches
        return True

    def positions_read(self, batches: int) -> int:
        """One past the largest mixture position among the first ``batches`` batches: a
        schedule may change from there on (Mixture.load_state_dict)."""
        if batches <= 0:
            return 0
        taken = self._batches.counts(min(batches, self._batches.length))
        last = 0
        for source, count in enumerate(taken.tolist()):
            if count:
                final = min(count * self.batch_size, int(self._available[source])) - 1
                last = max(
                    last, int(self.mixture._plan.positions_of(source, np.array([final]))[0]) + 1
                )
        return last


def _at_batch_boundaries(stages: tuple[Stage, ...], batch_size: int) -> list[Stage]:
    """The stages moved to the first batch at or after their start (of several that land on
    one batch, the last)."""
    moved: dict[int, Stage] = {}
    for stage in stages:
        start = -(-stage.start // batch_size)
        moved[start] = Stage(start, stage.weights, stage.units)
    return list(moved.values())
