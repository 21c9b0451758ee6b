"""Compose: a transform pipeline, run through the vision planner.

The planner (:mod:`flowloader.vision.plan`) reads the pipeline's steps once and runs them
fused where it can (bit-identical to running them one by one). It is imported as a module and
looked up at call time, so that either module may be imported first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import plan as planner


class Compose:
    """Apply transforms one after the other; random ones draw from ``rng`` when given."""

    takes_rng = True

    def __init__(self, transforms: Sequence[Callable[[Any], Any]]) -> None:
        self.transforms = list(transforms)

    def __call__(self, img: Any, rng: np.random.Generator | None = None) -> Any:
        return planner.plan_for(self).apply(img, rng)

    def __repr__(self) -> str:
        lines = [f"    {t!r}" for t in self.transforms]
        return "\n".join([f"{type(self).__name__}(", *lines, ")"])
