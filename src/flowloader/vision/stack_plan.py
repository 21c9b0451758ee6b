"""The batch plan for small images in memory: a whole pipeline over a stack of same-size 8-bit
images at once, each image with its own random parameters.

An array dataset (MNIST, CIFAR, :class:`~flowloader.vision.datasets.ArrayImageDataset`)
gathers a batch's pixels with one indexing operation; this module runs the transform on that
stack instead of image by image. The result is, bit for bit, ``np.stack`` of the per-sample
path (each image made a PIL image and run through the steps one by one) for the same indices:

- the random parameters are drawn from the same generators in the same order. From the
  loader's per-sample generators (a :class:`~flowloader.randomness.SampleRngs`), all the
  batch's draws are computed at once (:class:`~.transforms.batch_rng.PhiloxDraws`); from any
  other generators (a step's own ``rng=``, NumPy's global RNG), image by image and step by
  step, as the per-sample path asks for them;
- every operation is the per-sample one on the stack: the same padding (Pillow's fill per
  band, NumPy's ``pad`` for the other modes), integer crops and flips, and the same float32
  operations in the same order for the conversions.

Steps it takes (the images are PIL images until the conversion, arrays after it):

- before ``ToTensor``/``PILToTensor``: ``RandomCrop`` (``padding``, ``pad_if_needed``,
  ``fill``, every ``padding_mode``), ``RandomHorizontalFlip``, ``RandomVerticalFlip``, ``Pad``,
  ``CenterCrop``, ``RandomGrayscale`` (RGB or grey images), ``RandomAffine`` and
  ``RandomRotation`` (grey or RGB, NEAREST or BILINEAR, no ``expand``: Pillow's transform
  redone on the stack, :mod:`flowloader.vision.warp`), ``ColorJitter`` (grey or RGB:
  Pillow's ImageEnhance blends in float32 and its HSV round trip for hue, each image in its
  own order), ``Resize``
  (grey or RGB; NEAREST, BILINEAR, BICUBIC, BOX: Pillow's 22-bit fixed-point passes as
  integer matrix products, in Pillow's pass order);
- the conversion, written into the array the batch contract's ``allocate`` gives:
  ``ToTensor``, ``PILToTensor``, or ``PILToTensor`` + ``ToDtype(float32[, scale=True])``;
  a float conversion and the ``Normalize`` steps right after it take one pass where the
  native kernel runs: a table of each channel's 256 results, computed once by the same
  NumPy operations (:func:`flowloader.vision.native.lookup`);
- after it: ``Normalize`` (of floats), ``RandomErasing`` (a value, not "random"), and the
  flips.

Where the pixel steps are a crop with constant padding and flips, and nothing follows the
conversion but what its table holds (the CIFAR recipe), the gather, the crop, the flips and
the conversion are one native pass from the dataset's array into the batch
(:mod:`flowloader.vision.stack_crop`).

Any other step (``Lambda``, ``Resize`` with LANCZOS, ``RandomResizedCrop``...) sends the
pipeline to the per-sample path; :func:`compile_stack` says which step and why
(:func:`flowloader.vision.explain` says it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..randomness import SampleRngs, sample_context
from . import native
from .stack_crop import FusedCrop
from .stack_op import planes
from .stack_ops import MODES, Normalizing, NotBatched, Op, array_op, pixel_op
from .transforms.augment import ToDtype
from .transforms.batch_rng import PhiloxDraws, SampleDraws
from .transforms.transforms import PILToTensor, ToTensor

__all__ = ["StackPlan", "compile_stack"]


class StackPlan:
    """A pipeline compiled for a stack of 8-bit images of one shape (see the module
    docstring): :meth:`run` it on (N, H, W[, C]) uint8 pixels."""

    def __init__(
        self, pixel_ops: list[Op], conversion: str, array_ops: list[Op], shape: Any
    ) -> None:
        self.pixel_ops, self.conversion, self.array_ops = pixel_ops, conversion, array_ops
        self.ops = pixel_ops + array_ops
        self.shape = shape
        self.dtype = np.uint8 if conversion == "uint8" else np.float32
        self.draws = any(op.draws for op in self.ops)
        # The loader's generators can be read for the whole batch only when every drawing
        # step draws from them (not from an ``rng=`` of its own).
        self.own_rngs = any(op.draws and op.step.rng is not None for op in self.ops)
        # The conversion and the Normalize steps right after it, as each channel's 256
        # results (for native.lookup): the same NumPy operations, on every 8-bit value.
        self.folded = 0
        if conversion != "uint8":
            while self.folded < len(array_ops) and _per_channel(array_ops[self.folded]):
                self.folded += 1
        channels = 1 if len(shape) == 2 else shape[2]  # shape: (H, W[, C])
        # (a bare cast, PILToTensor + ToDtype(float32), is cheaper than the table)
        table = self.folded or conversion in ("float", "scaled")
        self.table = self._table(channels) if table else None
        # The whole pipeline is the table: the gather itself may write the batch.
        self.table_only = (
            self.table is not None
            and not pixel_ops
            and self.folded == len(array_ops)
            and not self.draws
        )
        # The pixel steps a crop and flips, and nothing after the conversion but what its
        # table holds: the gather may write the batch through native.crop (stack_crop.py).
        converted_whole = (conversion == "uint8" and not array_ops) or (
            self.table is not None and self.folded == len(array_ops)
        )
        self.fused = FusedCrop.of(pixel_ops, channels) if converted_whole else None

    def run(
        self,
        pixels: np.ndarray,
        rngs: Sequence[Any] | None,
        allocate: Any,
        indices: Sequence[int] | None = None,
    ) -> np.ndarray:
        """The batch of ``pixels`` (N, H, W[, C]) uint8, which it may change: ``rngs[k]`` is
        image k's generator (None: each sample's as the per-sample path finds it, for
        ``indices[k]`` when given), the output array from ``allocate(shape, dtype)``."""
        params = self._draw(len(pixels), rngs, indices)
        stack = planes(pixels)
        for op, drawn in zip(self.pixel_ops, params, strict=False):
            stack = op.apply(stack, drawn)
        out = allocate(stack.shape, self.dtype)
        done = 0  # the array ops applied with the conversion
        if self.table is not None and native.lookup(stack, self.table, out):
            done = self.folded
        else:
            self._convert(stack, out)
        drawn_after = params[len(self.pixel_ops) + done :]
        for op, drawn in zip(self.array_ops[done:], drawn_after, strict=True):
            out = op.apply(out, drawn)
        return out

    def run_rows(
        self,
        data: np.ndarray,
        rows: np.ndarray,
        allocate: Any,
        rngs: Sequence[Any] | None = None,
        indices: Sequence[int] | None = None,
    ) -> np.ndarray:
        """The batch of images ``rows`` (int64, indexed as NumPy does) of ``data``
        (N, H, W[, C]) uint8 (``rngs`` and ``indices`` as for :meth:`run`): the gather and
        the whole pipeline in one native pass where it is a table (``table_only``) or a crop
        and flips (``fused``), else ``run`` on ``data[rows]``."""
        if self.fused is not None and native.can_crop():
            params = self._draw(len(rows), rngs, indices)
            out = allocate((len(rows), *self.fused.shape), self.dtype)
            table = None if self.conversion == "uint8" else self.table
            self.fused.run(data, rows, params[: len(self.pixel_ops)], out, table)
            return out
        if self.table_only:
            assert self.table is not None
            view = planes(data)
            out = allocate((len(rows), *view.shape[1:]), self.dtype)
            if native.lookup(view, self.table, out, rows):
                return out
            return self.run(data[rows], None, lambda shape, dtype: out)
        return self.run(data[rows], rngs, allocate, indices)

    def _convert(self, stack: np.ndarray, out: np.ndarray) -> None:
        """The conversion of uint8 ``stack`` into ``out``, as the per-sample path does it."""
        if self.conversion in ("uint8", "float32"):
            out[...] = stack
        elif self.conversion == "scaled":  # v2's ToDtype: times the reciprocal of 255
            np.multiply(stack, np.float32(1 / 255), out=out, dtype=np.float32)
        else:
            np.divide(stack, np.float32(255), out=out, dtype=np.float32)

    def _table(self, channels: int) -> np.ndarray:
        """Each channel's 256 values through the conversion and the folded steps, (C, 256)."""
        values = np.broadcast_to(np.arange(256, dtype=np.uint8), (1, channels, 1, 256))
        table = np.empty((1, channels, 1, 256), np.float32)
        self._convert(values, table)
        for op in self.array_ops[: self.folded]:
            table = op.apply(table, ())
        return np.ascontiguousarray(table.reshape(channels, 256))

    def _draw(
        self, count: int, rngs: Sequence[Any] | None, indices: Sequence[int] | None
    ) -> list[tuple[np.ndarray, ...]]:
        """Every op's parameters for the batch, from the generators the per-sample path
        would draw from, in its order."""
        if not self.draws:
            return [() for _ in self.ops]
        if isinstance(rngs, SampleRngs) and not self.own_rngs:
            source = PhiloxDraws(rngs.seeds.epoch_seed, rngs.indices)
            return [op.draw(source) for op in self.ops]
        # Image by image, step by step: any generators, shared ones included.
        per_image = []
        for k in range(count):
            given = None if rngs is None else rngs[k]
            index = None if indices is None else indices[k]
            with sample_context(index, given):
                per_image.append(
                    [
                        op.draw(SampleDraws(op.step.generator(given))) if op.draws else ()
                        for op in self.ops
                    ]
                )
        return [
            tuple(np.concatenate(column) for column in zip(*drawn, strict=True))
            for drawn in zip(*per_image, strict=True)
        ]


def _per_channel(op: Op) -> bool:
    """Whether ``op`` maps each value by its channel alone (a Normalize whose mean and std
    are one number per channel): then it folds into the conversion's table."""
    return isinstance(op, Normalizing) and op.per_channel


def _to_dtype_conversion(step: ToDtype) -> str:
    """PILToTensor then ``ToDtype``: float32, scaled or not, written in one conversion."""
    if step.dtype != np.float32:
        raise NotBatched(f"ToDtype to {step.dtype} (only float32 is batched)")
    return "scaled" if step.scale else "float32"


def compile_stack(steps: Sequence[Any], image_shape: tuple[int, ...]) -> StackPlan | str:
    """The :class:`StackPlan` of ``steps`` for 8-bit images of ``image_shape`` ((H, W) or
    (H, W, C), as an array dataset stores them), or why they run per sample: a sentence that
    names the step."""
    if len(image_shape) == 2:
        shape = (1, *image_shape)
    elif len(image_shape) == 3 and image_shape[2] in MODES:
        shape = (image_shape[2], image_shape[0], image_shape[1])
    else:
        return f"images of shape {tuple(image_shape)} are not 8-bit PIL images"
    pixel_ops: list[Op] = []
    array_ops: list[Op] = []
    conversion: str | None = None
    for position, step in enumerate(steps):
        try:
            if conversion is None and type(step) in (ToTensor, PILToTensor):
                conversion = "float" if type(step) is ToTensor else "uint8"
                continue
            if conversion == "uint8" and not array_ops and type(step) is ToDtype:
                conversion = _to_dtype_conversion(step)
                continue
            if conversion is None:
                op = pixel_op(step, shape)
                pixel_ops.append(op)
            else:
                op = array_op(step, shape, conversion)
                array_ops.append(op)
            shape = op.shape
        except NotBatched as reason:
            return f"step {position} ({step!r}): {reason}"
    if conversion is None:
        return "the pipeline does not convert the images (no ToTensor or PILToTensor)"
    return StackPlan(pixel_ops, conversion, array_ops, image_shape)
