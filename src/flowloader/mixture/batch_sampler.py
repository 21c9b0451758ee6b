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

from ..distributed import world_or_single
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
    has no batch left of the samples the Mixture gives it.

    ``num_replicas`` ranks (default: torch.distributed's or torchrun's world, else 1) share
    the batches: rank ``rank`` takes every ``num_replicas``-th from its own, so every batch is
    on exactly one rank, and ranks differ by at most one batch (``drop_last=True`` also drops
    the last round's batches that not every rank would get, so every rank takes as many
    steps). Epochs come from the Mixture: each epoch's batches hold new samples."""

    def __init__(
        self,
        mixture: Mixture,
        batch_size: int,
        *,
        num_replicas: int | None = None,
        rank: int | None = None,
        drop_last: bool = False,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(
                f"batch_size should be a positive integer value, but got batch_size={batch_size!r}"
            )
        plan = getattr(mixture, "order_plan", None)
        if not isinstance(plan, MixturePlan):
            raise TypeError(
                f"MixtureBatchSampler takes a flowloader.Mixture (a dataset with an "
                f"order_plan), not {mixture!r}"
            )
        self.num_replicas, self.rank = _world(num_replicas, rank)
        self.mixture, self.batch_size, self.drop_last = mixture, batch_size, drop_last
        self.epoch = 0
        # The samples each source has in the mixture, and the batches they make.
        self._available = plan.counts(plan.length)
        rounding = math.floor if drop_last else math.ceil
        batches = [rounding(int(n) / batch_size) for n in self._available]
        self._stages = _at_batch_boundaries(plan.stages, batch_size)
        self._batches = MixturePlan(
            plan.names,
            batches,
            self._stages,
            seed=0,
            shuffle=False,
            stopping="first_exhausted",
            num_samples=None,
        )
        self.start = 0  # the global batch this pass begins at (a resume)
        self._saved_replicas = self.num_replicas  # the world size ``start`` was counted in

    @property
    def splits_by_rank(self) -> bool:
        """Each rank reads its own batches (DataLoader's check for duplicated ranks)."""
        return self.num_replicas > 1

    def set_epoch(self, epoch: int) -> None:
        """The epoch (the DataLoader hands it here and to the Mixture, whose samples move on
        each epoch); a new epoch begins at its first batch."""
        self.epoch = int(epoch)
        self.start = 0

    def _end(self) -> int:
        """One past the last global batch of this pass."""
        total = self._batches.length
        if self.drop_last:  # every rank as many batches: whole rounds only
            return self.start + (total - self.start) // self.num_replicas * self.num_replicas
        return total

    def __len__(self) -> int:
        return len(range(self.start + self.rank, self._end(), self.num_replicas))

    def __iter__(self) -> Iterator[list[int]]:
        mine = range(self.start + self.rank, self._end(), self.num_replicas)
        self.start = 0  # a restored position holds for one pass
        for first in range(0, len(mine), CHUNK):
            chunk = np.asarray(mine[first : first + CHUNK], dtype=np.int64)
            sources, numbers = self._batches.draws(chunk)
            for source, number in zip(sources.tolist(), numbers.tolist(), strict=True):
                yield self._positions(source, number).tolist()

    def _positions(self, source: int, number: int) -> np.ndarray:
        """The mixture positions of source ``source``'s batch ``number``."""
        first = number * self.batch_size
        last = min(first + self.batch_size, int(self._available[source]))
        draws = np.arange(first, last, dtype=np.int64)
        return self.mixture.order_plan.positions_of(source, draws)

    # -- resuming (flowloader.order's contract; the loader's state_dict() holds the rest) ---

    def state_dict(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "batch_size": self.batch_size,
            "drop_last": self.drop_last,
            "num_replicas": self.num_replicas,
            "epoch": self.epoch,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in ("batch_size", "drop_last"):
            if key in state and state[key] != getattr(self, key):
                raise ValueError(
                    f"this MixtureBatchSampler state was saved with {key}={state[key]!r}, "
                    f"not {key}={getattr(self, key)!r}: its batches would be other batches"
                )
        self.start = int(state.get("start", 0))
        self._saved_replicas = int(state.get("num_replicas", self.num_replicas))
        self.epoch = int(state.get("epoch", self.epoch))

    def order_settings(self) -> dict[str, Any]:
        """flowloader.order's contract: its batches depend on the batch size and drop_last
        (order_changes compares them with what was read)."""
        return {"order": "mixture batches"}

    def restart_after(self, batches: int, regroup: bool = False) -> bool:
        """Continue after each rank of the saved world delivered ``batches`` batches since
        ``start``, without computing them: the rest is dealt out over this world."""
        self.start += batches * self._saved_replicas
        self._saved_replicas = self.num_replicas
        return True

    def read_state(self, state: dict[str, Any], taken: int) -> dict[str, Any]:
        """What every rank together has read when this rank has delivered ``taken`` batches
        since ``state``: the global batches, what they took of each source (a short last
        batch as it was), the batch-level stages among them, and the mixture positions they
        reach (``prefix``)."""
        start = int(state.get("start", 0)) if state else 0
        batches = min(start + taken * self.num_replicas, self._batches.length)
        read = self._composition(batches)
        last = 0
        for source, name in enumerate(self.mixture.names):
            if read["drawn"].get(name):
                final = np.array([read["drawn"][name] - 1], dtype=np.int64)
                last = max(last, int(self.mixture.order_plan.positions_of(source, final)[0]) + 1)
        # an epoch after this one follows all of this one's batches
        return {"prefix": last, **read, "epoch_batches": self._composition(self._batches.length)}

    def _composition(self, batches: int) -> dict[str, Any]:
        """What the first ``batches`` global batches took, by source name (a source at
        weight 0 throughout is left out, so adding one changes nothing)."""
        names = self.mixture.names
        taken = self._batches.counts(min(batches, self._batches.length))
        drawn = np.minimum(taken * self.batch_size, self._available)

        def by_name(values: Any) -> dict[str, int]:
            return {name: int(v) for name, v in zip(names, values, strict=True) if v}

        return {
            "batch_size": self.batch_size,
            "drop_last": self.drop_last,
            "batches": batches,
            "taken": by_name(taken),
            "drawn": by_name(drawn),
            "stages": [
                [stage.start, by_name(stage.units)]
                for stage in self._stages
                if stage.start < batches
            ],
        }

    def order_changes(self, saved: dict[str, Any], epoch: int) -> list[str]:
        """What differs in the first ``saved["batches"]`` batches (and in epochs after the
        first, in all of an epoch's): which sources they came from, and how many samples each
        took (a source's short last batch included)."""
        for key in ("batch_size", "drop_last"):
            if key in saved and saved[key] != getattr(self, key):
                return [
                    f"the MixtureBatchSampler was saved with {key}={saved[key]!r}, not "
                    f"{key}={getattr(self, key)!r}: its batches would be other batches"
                ]
        if epoch > 0 and "epoch_batches" in saved:  # every batch of the epochs before
            whole = saved["epoch_batches"]
            now = self._composition(self._batches.length)
            if now != whole:
                return [
                    f"in epoch {epoch}, MixtureBatchSampler's batches per epoch changed (they "
                    f"were {whole['batches']} taking {whole['drawn']} samples per source, now "
                    f"{now['batches']} taking {now['drawn']}): every epoch before was read"
                ]
        now = self._composition(int(saved["batches"]))
        return [
            f"MixtureBatchSampler's first {saved['batches']} batches {what} "
            f"{_shown(saved[key], key)}, now {_shown(now[key], key)}"
            for key, what in (
                ("stages", "were cut into stages at batches"),
                ("taken", "came from the sources as"),
                ("drawn", "took samples from the sources as"),
            )
            if saved.get(key) != now[key]
        ]


def _shown(values: Any, key: str) -> Any:
    """A composition's part as an error message shows it (stages: where they begin)."""
    return [start for start, _ in values] if key == "stages" else values


def _world(num_replicas: int | None, rank: int | None) -> tuple[int, int]:
    """(num_replicas, rank): as given, else torch.distributed's or torchrun's, else one rank."""
    if num_replicas is None or rank is None:
        found = world_or_single()
        num_replicas = found[0] if num_replicas is None else num_replicas
        rank = found[1] if rank is None else rank
    if isinstance(num_replicas, bool) or not isinstance(num_replicas, int) or num_replicas <= 0:
        raise ValueError(f"num_replicas must be a positive int, but got {num_replicas!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < num_replicas:
        raise ValueError(
            f"Invalid rank {rank!r}, rank should be in the interval [0, {num_replicas - 1}]"
        )
    return num_replicas, rank


def _at_batch_boundaries(stages: tuple[Stage, ...], batch_size: int) -> list[Stage]:
    """The stages moved to the first batch at or after their start (of several that land on
    one batch, the last)."""
    moved: dict[int, Stage] = {}
    for stage in stages:
        start = -(-stage.start // batch_size)
        moved[start] = Stage(start, stage.weights, stage.units)
    return list(moved.values())
