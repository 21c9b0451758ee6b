"""Running a Compose over a whole batch at once, bit-identical to running it per sample.

A batch starts as what a dataset holds, e.g. MNIST's uint8 (N, H, W): the pixels of N PIL
images ("pil" layout, N x H x W [x C]). ``ToTensor`` turns it into (N, C, H, W) floats
("tensor" layout). Random transforms draw the same numbers as the per-sample path: per
generator, one row of draws per sample, in sample order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import flowloader

from . import rng as _rng


@dataclass
class ImageBatch:
    array: np.ndarray
    layout: str  # "pil": (N, H, W) or (N, H, W, C) pixels; "tensor": (N, C, H, W)

    def width_axis(self) -> int:
        return 2 if self.layout == "pil" else -1

    def height_axis(self) -> int:
        return 1 if self.layout == "pil" else -2

    def chw_view(self) -> np.ndarray:
        """ "pil" pixels as an (N, C, H, W) view, no copy."""
        pixels = self.array
        return pixels[:, None] if pixels.ndim == 3 else pixels.transpose(0, 3, 1, 2)


def batch_capable(transform: Any) -> bool:
    """True if ``transform`` (a Compose or a single transform) has a batch implementation."""
    steps = getattr(transform, "transforms", None)
    if steps is None:
        return transform is not None and hasattr(transform, "apply_batch")
    return all(hasattr(step, "apply_batch") for step in steps)


def apply_batch(transform: Any, pixels: np.ndarray, indices: Any = None) -> np.ndarray:
    """Apply a batch-capable transform to a stack of images' pixels; returns the array.

    ``indices`` are the samples' dataset indices, for their own generators inside a loader.
    """
    steps = list(getattr(transform, "transforms", [transform]))
    draws = _draw_per_sample(steps, len(pixels), indices)
    batch = ImageBatch(pixels, "pil")
    position = 0
    while position < len(steps):
        step = steps[position]
        following = steps[position + 1] if position + 1 < len(steps) else None
        fused = getattr(step, "fuse_batch", None)
        if fused is not None and following is not None and fused(batch, following):
            batch = step.apply_fused(batch, following)
            position += 2
            continue
        batch = step.apply_batch(batch, draws.get(position))
        position += 1
    return batch.array


def _draw_per_sample(steps: list[Any], count: int, indices: Any) -> dict[int, np.ndarray]:
    """Uniform draws for the random steps, grouped by generator so that each generator yields
    its numbers in the order the per-sample path would ask for them."""
    by_generator: dict[int, tuple[Any, list[int]]] = {}
    for position, step in enumerate(steps):
        if getattr(step, "draws_per_sample", 0):
            source = _rng.batch_source(step.rng)
            by_generator.setdefault(id(source), (source, []))[1].append(position)
    draws: dict[int, np.ndarray] = {}
    for source, positions in by_generator.values():
        if source is _rng.PER_SAMPLE:
            table = np.stack(
                [flowloader.sample_rng(int(i)).random(len(positions)) for i in indices]
            ).reshape(count, len(positions))
        else:
            table = np.asarray(source.random(count * len(positions))).reshape(count, len(positions))
        for column, position in enumerate(positions):
            draws[position] = table[:, column]
    return draws
