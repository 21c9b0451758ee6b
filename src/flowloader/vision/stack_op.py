"""What a step of the batch plan is (see :mod:`.stack_plan`): an :class:`Op` that draws every
image's parameters and applies them to the whole stack, and the reasons a step has none."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

# The PIL mode Image.fromarray gives an (H, W) or (H, W, C) uint8 array, by channel count.
MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}


class NotBatched(Exception):
    """Why a step has no batch form (the message says which step and why)."""


class Window(NamedTuple):
    """A crop as the native kernel takes it (``native.crop``): the image padded by
    ``padding`` (top, left) of ``fill`` (uint8, one per channel) on every side, then a window
    of the op's shape at each image's drawn (top, left), or at ``fixed`` for all."""

    padding: tuple[int, int]
    fill: np.ndarray
    fixed: tuple[int, int] | None


class Op:
    """One step on the stack: ``draw`` its random parameters for every image, then ``apply``
    them to the (N, C, H, W) stack (before the conversion, uint8 pixels of PIL images, often
    a view of channels-last memory). ``shape`` is the (C, H, W) it leaves."""

    step: Any
    shape: tuple[int, int, int]
    draws = False
    # A random flip's bit for the native crop (1 left-right, 2 top-bottom); 0: not a flip.
    flip_bit = 0

    def window(self) -> Window | None:
        """The op as a crop with constant padding, where it is one (else None)."""
        return None

    def draw(self, source: Any) -> tuple[np.ndarray, ...]:
        """Every image's random parameters, from ``source`` (a PhiloxDraws or SampleDraws)."""
        return ()

    def apply(self, stack: np.ndarray, params: tuple[np.ndarray, ...]) -> np.ndarray:
        """The step on the whole stack with the drawn ``params``; may change ``stack``."""
        raise NotImplementedError


def planes(pixels: np.ndarray) -> np.ndarray:
    """(N, H, W) or (N, H, W, C) 8-bit pixels, as an array dataset stores them, viewed as the
    (N, C, H, W) stack the ops work on (no copy)."""
    return pixels[:, None] if pixels.ndim == 3 else pixels.transpose(0, 3, 1, 2)
