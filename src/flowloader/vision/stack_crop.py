"""A batch plan's pixel steps as one native pass, where they are a crop and flips.

The CIFAR recipe's pixel steps, ``RandomCrop(32, padding=4)`` and ``RandomHorizontalFlip``,
take the plan's NumPy path through a gather, a padded copy, a window gather and a flipped
copy before the conversion: four passes over the batch for one's worth of work. Where a
plan's pixel steps are a crop with constant padding (``RandomCrop``, ``CenterCrop``, or
none) followed by random flips only, and what follows them is the conversion alone (or its
table of each channel's results), :func:`native.crop <flowloader.vision.native.crop>` reads
each image's window straight from the dataset's array into the batch, mirrored as drawn:
the same bytes (every output pixel is a source pixel or the fill) from the same draws.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import native
from .stack_op import Op, Window, planes


class FusedCrop:
    """The crop-and-flips form of ``pixel_ops`` (see the module docstring); build it with
    :meth:`of`."""

    def __init__(self, window: Window, flip_from: int, pixel_ops: Sequence[Op]) -> None:
        self.window = window
        self.flip_from = flip_from  # the ops (and their params) from here on are flips
        self.pixel_ops = list(pixel_ops)
        self.shape = self.pixel_ops[-1].shape

    @classmethod
    def of(cls, pixel_ops: Sequence[Op], channels: int) -> FusedCrop | None:
        """The fused form of ``pixel_ops`` over ``channels``-channel images, or None where
        they are not a constant-padded crop and flips."""
        if not pixel_ops:
            return None
        window = pixel_ops[0].window()
        flip_from = 0 if window is None else 1
        if window is None:  # flips alone: the whole image is the window
            window = Window((0, 0), np.zeros(channels, np.uint8), (0, 0))
        if not all(op.flip_bit for op in pixel_ops[flip_from:]):
            return None
        return cls(window, flip_from, pixel_ops)

    def run(
        self,
        data: np.ndarray,
        rows: np.ndarray,
        params: Sequence[tuple[np.ndarray, ...]],
        out: np.ndarray,
        table: np.ndarray | None,
    ) -> None:
        """Write images ``rows`` of ``data`` (N, H, W[, C]) uint8 into ``out`` with the drawn
        ``params`` (one tuple per pixel op, as ``StackPlan._draw`` gives them)."""
        count = len(rows)
        if self.window.fixed is not None:
            top = np.full(count, self.window.fixed[0], np.int64)
            left = np.full(count, self.window.fixed[1], np.int64)
        else:
            top, left = (np.ascontiguousarray(p, np.int64) for p in params[0])
        flips = np.zeros(count, np.uint8)
        flipping = zip(self.pixel_ops[self.flip_from :], params[self.flip_from :], strict=True)
        for op, (chosen,) in flipping:
            flips[np.asarray(chosen, bool)] ^= op.flip_bit
        native.crop(
            planes(data),
            rows,
            (top, left),
            flips,
            self.window.fill,
            self.window.padding,
            out,
            table,
        )
