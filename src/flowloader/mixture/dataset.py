"""Mixture: many map-style datasets read as one, by weight, with curricula.

A Mixture is itself a map-style dataset whose position i is pure arithmetic (plan.py): which
source, and which sample of it. So a DataLoader reads it with every guarantee it gives any
map-style dataset: the same batches for any num_workers and worker method, and a
``state_dict()`` that resumes onto another worker count or world size. See
docs/design/mixtures.md.
"""

from __future__ import annotations

import functools
import math
import numbers
import operator
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..batching import Allocate, declared, fetch_many, load_one_by_one, overrides_getitem
from ..dataset import Dataset, is_iterable
from ..order import Read, order_changes, order_state
from ..randomness import SampleRngs
from .batches import Part, load_batch, runs
from .plan import STOPPING, MixturePlan
from .schedule import Stage, parse

STATE_FORMAT = "flowloader.Mixture"
# The most positions a resume compares one by one where the schedule changed before them.
COMPARED_POSITIONS = 1 << 22


class Mixture(Dataset[Any]):
    """Map-style datasets mixed by weight into one (``flowloader.Mixture``).

    ``sources``: a dict ``name -> dataset``, or a list (named ``"0"``, ``"1"``, ...).
    ``weights``: a dict ``name -> weight`` or a list (normalised), or a schedule: a list of
    ``(start, weights)`` pairs, ``start`` the mixture position where that stage begins.
    Every prefix of every stage holds each source within 2 samples of its weight's share.
    ``shuffle``: each source is read in a seeded permutation per pass over it (else in
    order). ``stopping``: ``"first_exhausted"`` ends the mixture where the first source would
    begin a second pass; ``"all_exhausted"`` once every source was read whole, sources that
    run out earlier starting over; ``"never"`` after ``num_samples`` (required then), every
    source starting over as needed. ``num_samples`` also caps the other two.

    Epochs (``set_epoch``, which a DataLoader calls for you): each epoch continues every
    source's draws where the epoch before stopped, so a big source moves on and a small one
    starts a new pass in a new order; the positions, the schedule and the length stay.
    """

    def __init__(
        self,
        sources: Mapping[str, Any] | Sequence[Any],
        weights: Any,
        *,
        seed: int = 0,
        shuffle: bool = True,
        stopping: str = "first_exhausted",
        num_samples: int | None = None,
    ) -> None:
        self.sources = _named(sources)
        self.names = tuple(self.sources)
        if stopping not in STOPPING:
            raise ValueError(
                f"stopping should be one of {', '.join(STOPPING)}, but got stopping={stopping!r}"
            )
        if num_samples is not None and (
            isinstance(num_samples, bool)
            or not isinstance(num_samples, numbers.Integral)
            or num_samples < 0
        ):
            raise ValueError(f"num_samples should be a non-negative int, but got {num_samples!r}")
        num_samples = None if num_samples is None else int(num_samples)
        if stopping == "never" and num_samples is None:
            raise ValueError("stopping='never' needs num_samples=: the mixture would never end")
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise TypeError(f"seed should be an int, but got {seed!r}")
        seed = int(seed)
        lengths = tuple(len(source) for source in self.sources.values())
        stages = parse(weights, self.names)
        _check_weighted_sources_have_samples(self.names, lengths, stages)
        self.seed: int = seed
        self.shuffle: bool = shuffle
        self.stopping: str = stopping
        self.num_samples = num_samples
        self.epoch: int = 0
        self._plan: MixturePlan = MixturePlan(
            self.names,
            lengths,
            stages,
            seed=seed,
            shuffle=shuffle,
            stopping=stopping,
            num_samples=num_samples,
        )

    @property
    def source_lengths(self) -> tuple[int, ...]:
        """Each source's number of samples, in the order of ``names``."""
        return self._plan.lengths

    @property
    def order_plan(self) -> MixturePlan:
        """The arithmetic of the order (which source and draw each position is): what a
        batch sampler that follows the mixture's sources (MixtureBatchSampler) builds on."""
        return self._plan

    @property
    def stages(self) -> tuple[Stage, ...]:
        return self._plan.stages

    def __len__(self) -> int:
        return self._plan.length

    def set_epoch(self, epoch: int) -> None:
        """Read epoch ``epoch``: every source continues from where the epochs before it left
        off (the DataLoader hands its epoch here, in every worker)."""
        self.epoch = int(epoch)

    @property
    def lengths(self) -> np.ndarray | None:
        """Each position's item length this epoch, from the sources' ``lengths`` (token
        files have them); None if a source has none."""
        per_source = [getattr(source, "lengths", None) for source in self.sources.values()]
        if any(lengths is None for lengths in per_source):
            return None
        sources, inner = self.locate_many(np.arange(len(self)))
        out = np.empty(len(self), dtype=np.int64)
        for number, lengths in enumerate(per_source):
            at = sources == number
            out[at] = np.asarray(lengths, dtype=np.int64)[inner[at]]
        return out

    # -- where positions come from ----------------------------------------------------------

    def locate(self, index: int) -> tuple[str, int]:
        """(source name, index in that source) of mixture position ``index``."""
        sources, indices = self.locate_many([index])
        return self.names[sources[0]], int(indices[0])

    def locate_many(self, indices: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For a batch of mixture positions, vectorised: (source numbers, indices in those
        sources) as two int64 arrays; ``mix.names[n]`` names source number n."""
        positions = np.asarray(indices, dtype=np.int64).reshape(-1)
        length = self._plan.length
        if positions.size and (positions.min() < 0 or positions.max() >= length):
            bad = int(positions[(positions < 0) | (positions >= length)][0])
            raise IndexError(f"index {bad} is out of range for a Mixture of length {length}")
        return self._plan.locate(positions, self.epoch)

    def sources_of(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """The source number of each mixture position (``locate_many`` without the indices
        in the sources, which need each source's permutation)."""
        return self._plan.draws(np.asarray(indices, dtype=np.int64).reshape(-1))[0]

    def counts(self, n: int | None = None) -> dict[str, int]:
        """How many of the first ``n`` positions (all, by default) each source gives."""
        n = len(self) if n is None else n
        return dict(zip(self.names, self._plan.counts(n).tolist(), strict=True))

    # -- samples ----------------------------------------------------------------------------

    def __getitem__(self, index: int) -> Any:
        name, inner = self.locate(operator.index(index))
        return self.sources[name][inner]

    def __getitems__(
        self,
        indices: list[int],
        rngs: Sequence[Any] | None = None,
        allocate: Allocate | None = None,
    ) -> Any:
        """One batch: each source loads its part with its own batch path (``__getitems__``)
        where it has one, and the parts are merged (batches.py). Every sample draws from its
        mixture position's generator."""
        if overrides_getitem(self, Mixture):  # a subclass's own __getitem__ must run
            return load_one_by_one(self, indices, rngs)
        sources, inner = self.locate_many(indices)
        parts: list[Part] = []
        for number in np.unique(sources).tolist():
            source = self.sources[self.names[number]]
            at = np.flatnonzero(sources == number).tolist()
            # A batch path that builds into allocate is called per run: in place, no copy.
            for places in runs(at) if _builds_in_place(source) else [at]:
                load = functools.partial(
                    fetch_many, source, inner[places].tolist(), _rngs_at(rngs, indices, places)
                )
                parts.append((places, load))
        return load_batch(parts, len(indices), allocate)

    # -- resuming (flowloader.order's contract) -------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """What a resumed Mixture must agree with: the sources (names, lengths, and the
        description of each that describes itself), the order's settings, the whole schedule
        and the length (a DataLoader's state_dict() carries it)."""
        return {
            "format": STATE_FORMAT,
            "sources": [[name, n] for name, n in zip(self.names, self.source_lengths, strict=True)],
            # per stage: its start, the weights as given (normalised) and as the order uses them
            "schedule": [
                [stage.start, list(stage.weights), list(stage.units)] for stage in self.stages
            ],
            "seed": self.seed,
            "shuffle": self.shuffle,
            "length": len(self),
            # each source that describes itself (flowloader.order's contract: a table, a
            # Subset, a Mixture, ...): what was drawn of it must be as it was
            "described": {
                name: described
                for name, source in self.sources.items()
                if (described := order_state(source)) is not None
            },
        }

    def order_state(self) -> dict[str, Any]:
        return self.state_dict()

    def order_changes(self, saved: dict[str, Any], read: Read) -> list[str]:
        """What differs from the saved Mixture in what ``read`` covers: in an epoch after the
        first, anything (each epoch continues the draws of every one before); in the first,
        the positions below the read prefix (a schedule may change from there on, and
        ``num_samples`` grow, as long as a short last batch did not end at the old end)."""
        if read.epoch > 0:
            return resume_differences(self, saved, None, why=f"in epoch {read.epoch}, ")
        return resume_differences(self, saved, read.prefix)

    def load_state_dict(self, state: dict[str, Any], consumed: int | None = None) -> None:
        """Check that this Mixture continues ``state``'s: every position below ``consumed``
        (all of them when None) maps to the same source and sample. A schedule changed from
        ``consumed`` on (a new stage, new weights, a source added with weight 0 before it) is
        accepted: each source continues where it was. Otherwise ValueError saying what
        changed. Nothing is restored: the order is arithmetic, and the loader keeps the
        position."""
        differences = resume_differences(self, state, consumed)
        if differences:
            raise ValueError(
                "this Mixture does not continue the saved one: " + "; ".join(differences)
            )


def resume_differences(
    mixture: Mixture, state: dict[str, Any], consumed: int | None, why: str = ""
) -> list[str]:
    """What differs between ``state``'s mixture and ``mixture`` on the positions below
    ``consumed`` (None: on every position, and the length); empty when nothing does.
    A position below ``consumed`` must exist in both or in neither."""
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        return ["the state is not a Mixture's state_dict()"]
    differences = []
    saved_sources = dict(state["sources"])
    current = dict(zip(mixture.names, mixture.source_lengths, strict=True))
    for name, n in saved_sources.items():
        if name not in current:
            differences.append(f"source {name!r} is gone")
        elif current[name] != n:
            differences.append(f"source {name!r} had {n} samples, now {current[name]}")
    for key in ("seed", "shuffle"):
        if state[key] != getattr(mixture, key):
            differences.append(f"{key} was {state[key]!r}, now {getattr(mixture, key)!r}")
    for name, source in mixture.sources.items():
        # A source's draws are scattered over it: any of its positions may have been read.
        saved_source = state.get("described", {}).get(name)
        if name in saved_sources and (saved_source is not None or order_state(source)):
            found = order_changes(source, saved_source, Read(0, None))
            differences += [f"source {name!r}: {difference}" for difference in found]
    if differences:
        return differences
    saved_length = int(state.get("length", len(mixture)))
    if consumed is None:
        if saved_length != len(mixture):
            differences.append(
                f"{why}the mixture had {saved_length} positions, now {len(mixture)} (every "
                "position was read, or may have been: a shuffled order, or an earlier epoch)"
            )
        consumed = max(saved_length, len(mixture))
        read = f"{why}every position"
    else:
        if min(consumed, saved_length) != min(consumed, len(mixture)):
            differences.append(
                f"the mixture had {saved_length} positions, now {len(mixture)}: the positions "
                f"read reach {consumed} (a short last batch ended at the old end, and would "
                "be another batch now)"
            )
        read = f"the {consumed} positions already read"
    names = [n for n, _ in state["sources"]]
    saved = [
        (start, dict(zip(names, w, strict=True)), dict(zip(names, u, strict=True)))
        for start, w, u in state["schedule"]
    ]
    now = [
        (
            stage.start,
            dict(zip(mixture.names, stage.weights, strict=True)),
            dict(zip(mixture.names, stage.units, strict=True)),
        )
        for stage in mixture.stages
    ]
    diverged = _first_divergence(saved, now)
    if diverged < consumed:
        diverged = _first_moved(mixture, state, int(diverged), min(consumed, len(mixture)))
    if diverged < consumed:
        differences.append(
            f"the schedule changed at position {diverged}, before {read} (saved stages "
            f"{_describe(saved)}, now {_describe(now)}); change it only after what was read"
        )
    return differences


Schedule = list[tuple[int, dict[str, float], dict[str, int]]]


def _first_divergence(saved: Schedule, now: Schedule) -> float:
    """The first position from which the two schedules order the sources differently (inf if
    never): a stage start that only one of them has (a stage restarts the interleave there),
    or stages whose integer weights differ (a source missing from one has weight 0 there)."""
    saved_units = {start: units for start, _, units in saved}
    now_units = {start: units for start, _, units in now}
    for start in sorted(saved_units.keys() | now_units.keys()):
        if start not in saved_units or start not in now_units:
            return start
        a, b = saved_units[start], now_units[start]
        if any(a.get(name, 0) != b.get(name, 0) for name in a.keys() | b.keys()):
            return start
    return math.inf


def _first_moved(mixture: Mixture, state: dict[str, Any], first: int, end: int) -> float:
    """The first position in ``first .. end - 1`` that the saved schedule and this one give
    to another source or draw (inf if none): a schedule that differs there may still read
    every position alike (a new stage with the weights of the old one, say). Compared up to
    COMPARED_POSITIONS positions; past that, the first difference in the schedule counts."""
    if end - first > COMPARED_POSITIONS:
        return first
    names = [name for name, _ in state["sources"]]
    if list(names) != list(mixture.names):
        return first  # sources added or reordered: the plans' numbers differ
    saved = MixturePlan(
        names,
        [n for _, n in state["sources"]],
        [Stage(start, tuple(w), tuple(u)) for start, w, u in state["schedule"]],
        seed=state["seed"],
        shuffle=state["shuffle"],
        stopping="never",
        num_samples=int(state.get("length", len(mixture))),
    )
    for begin in range(first, end, 1 << 16):
        positions = np.arange(begin, min(begin + (1 << 16), end), dtype=np.int64)
        old_sources, old_draws = saved.draws(positions)
        new_sources, new_draws = mixture._plan.draws(positions)
        moved = np.flatnonzero((old_sources != new_sources) | (old_draws != new_draws))
        if moved.size:
            return int(positions[moved[0]])
    return math.inf


def _describe(schedule: Schedule) -> str:
    return (
        "["
        + ", ".join(
            f"{start}: {{{', '.join(f'{n}: {w:.4g}' for n, w in weights.items())}}}"
            for start, weights, _ in schedule
        )
        + "]"
    )


def _named(sources: Mapping[str, Any] | Sequence[Any]) -> dict[str, Any]:
    if isinstance(sources, Mapping):
        named = dict(sources)
        bad = [name for name in named if not isinstance(name, str)]
        if bad:
            raise TypeError(f"source names must be strings, but got {bad}")
    elif isinstance(sources, Sequence) and not isinstance(sources, (str, bytes)):
        named = {str(k): source for k, source in enumerate(sources)}
    else:
        raise TypeError(f"sources must be a dict name -> dataset or a list, not {sources!r}")
    if not named:
        raise ValueError("a Mixture needs at least one source")
    for name, source in named.items():
        if (
            is_iterable(source)
            or not hasattr(source, "__getitem__")
            or not hasattr(source, "__len__")
        ):
            raise TypeError(
                f"source {name!r} ({type(source).__name__}) is not a map-style dataset: a Mixture "
                "reads its sources by index, so each needs __getitem__ and __len__ (a stream of "
                "shards can be read by index with flowloader.shards.ShardedDataset)"
            )
    return named


def _check_weighted_sources_have_samples(
    names: Sequence[str], lengths: Sequence[int], stages: Sequence[Stage]
) -> None:
    for s, (name, n) in enumerate(zip(names, lengths, strict=True)):
        if n == 0 and any(stage.units[s] for stage in stages):
            raise ValueError(f"source {name!r} is empty but has a weight above 0")


def _builds_in_place(source: Any) -> bool:
    getitems = getattr(source, "__getitems__", None)
    return callable(getitems) and declared(getitems).allocate


def _rngs_at(rngs: Sequence[Any] | None, indices: Sequence[int], at: list[int]) -> Any:
    """The generators of the samples at batch positions ``at``."""
    if rngs is None:
        return None
    if isinstance(rngs, SampleRngs):
        return rngs.for_indices([indices[k] for k in at])
    return [rngs[k] for k in at]
