"""A mixture's weights, checked and made exact: a schedule of stages, each the position where
it begins and one weight per source, normalised and turned into integers summing to UNITS.

Accepted forms: one stage as a dict ``name -> weight`` or a list (one weight per source, in
the sources' order); or a schedule, a list of ``(start, weights)`` pairs whose starts begin at
0 and increase. Every stage names every source (0 for one it does not read).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .interleave import UNITS


@dataclass(frozen=True)
class Stage:
    start: int
    weights: tuple[float, ...]  # per source, summing to 1
    units: tuple[int, ...]  # the same, as integers summing to UNITS


def parse(weights: Any, names: Sequence[str]) -> tuple[Stage, ...]:
    """The stages ``weights`` describes over the sources ``names``; ValueError or TypeError
    naming what is wrong."""
    pairs = _as_schedule(weights)
    stages = []
    for k, (start, stage_weights) in enumerate(pairs):
        where = "weights" if len(pairs) == 1 else f"stage {k} (starting at position {start})"
        if isinstance(start, bool) or not isinstance(start, numbers.Integral):
            raise TypeError(f"{where}: a stage's start must be an int position, not {start!r}")
        start = int(start)
        if k == 0 and start != 0:
            raise ValueError(
                f"the schedule must begin at position 0, but its first stage starts at {start}"
            )
        if k > 0 and start <= pairs[k - 1][0]:
            raise ValueError(
                f"the schedule's starts must increase, but stage {k} starts at {start} after "
                f"stage {k - 1} at {pairs[k - 1][0]}"
            )
        values = _per_source(stage_weights, names, where)
        total = math.fsum(values)
        if total <= 0:
            raise ValueError(
                f"{where}: every weight is 0; at least one source needs a weight above 0"
            )
        normalised = tuple(v / total for v in values)
        stages.append(Stage(start, normalised, to_units(normalised)))
    return tuple(stages)


def _as_schedule(weights: Any) -> list[tuple[Any, Any]]:
    """``weights`` as a list of (start, stage weights) pairs."""
    if isinstance(weights, Mapping):
        return [(0, weights)]
    if isinstance(weights, np.ndarray):
        weights = weights.tolist()
    if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence) or not weights:
        raise TypeError(
            "weights must be a dict name -> weight, a list of weights, or a schedule (a list of "
            f"(start, weights) pairs), not {weights!r}"
        )
    if all(_is_stage(item) for item in weights):
        return [(item[0], item[1]) for item in weights]
    return [(0, weights)]


def _is_stage(item: Any) -> bool:
    return (
        isinstance(item, (tuple, list))
        and len(item) == 2
        and isinstance(item[0], numbers.Integral)
        and isinstance(item[1], (Mapping, list, tuple, np.ndarray))
    )


def _per_source(weights: Any, names: Sequence[str], where: str) -> list[float]:
    if isinstance(weights, Mapping):
        unknown = [name for name in weights if name not in names]
        if unknown:
            raise ValueError(
                f"{where} names unknown source(s) {unknown}; the sources are {list(names)}"
            )
        missing = [name for name in names if name not in weights]
        if missing:
            raise ValueError(
                f"{where} gives no weight for source(s) {missing} (give 0 for a source this "
                "stage does not read)"
            )
        values = [weights[name] for name in names]
    else:
        values = weights.tolist() if isinstance(weights, np.ndarray) else list(weights)
        if len(values) != len(names):
            raise ValueError(
                f"{where} has {len(values)} weight(s) for {len(names)} source(s) {list(names)}"
            )
    for name, value in zip(names, values, strict=True):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{where}: the weight of source {name!r} is not a number: {value!r}")
        if not math.isfinite(value) or value < 0:
            raise ValueError(
                f"{where}: the weight of source {name!r} is {value!r}; weights must be finite "
                "and not negative"
            )
    return [float(v) for v in values]


def to_units(weights: Sequence[float]) -> tuple[int, ...]:
    """Integers proportional to ``weights`` summing to UNITS (largest remainders get the
    rest); a positive weight never rounds to 0."""
    raw = [w * UNITS for w in weights]
    units = [math.floor(r) for r in raw]
    order = sorted(range(len(raw)), key=lambda s: (-(raw[s] - units[s]), s))
    for s in order[: UNITS - sum(units)]:
        units[s] += 1
    for s, w in enumerate(weights):
        if w > 0 and units[s] == 0:  # below 2**-31: take the unit from the heaviest
            units[max(range(len(units)), key=units.__getitem__)] -= 1
            units[s] = 1
    return tuple(units)
