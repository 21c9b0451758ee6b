"""One plan per transform pipeline: how an image, or a whole batch, is decoded, transformed
and converted. ``Compose`` runs through it, and every image dataset asks it for its batches
(MNIST, CIFAR, DatasetFolder/ImageFolder); a pipeline it cannot plan runs step by step.

A pipeline is read as ``[geometry] [other steps...] [flips...] [conversion]``:

- **conversion**: a final ``ToTensor``, ``ToTensor`` + ``Normalize`` or ``PILToTensor``. It
  is written straight into the output array, one slot per image, which the caller provides
  (inside a DataLoader worker: the shared memory the batch travels in). ToTensor + Normalize
  is one pass with the same float32 operations in the same order as the two steps: the same
  bits, without the intermediate arrays.
- **flips** just before it are views of the pixels the conversion reads: free.
- **geometry**: a leading ``RandomResizedCrop``, ``Resize``, or ``Resize`` + ``CenterCrop``,
  which for a JPEG file is planned from its header. When the head is only the geometry and the
  native kernel is built (:mod:`flowloader.vision.native`), the whole pipeline is native, one
  call for a whole batch (:class:`BatchWriter`): libjpeg-turbo decodes only the rows and columns
  the resize reads (at 1/2, 1/4 or 1/8 scale while at least
  ``geometry.NATIVE_DECODED_PER_OUTPUT`` decoded pixels remain per output pixel), Pillow's
  resampling runs on them bit for bit, and the flips and the conversion are written into the
  slot. Without a reduced scale that is exactly torchvision's PIL result; with one it differs
  slightly (``test_native_kernel.py`` bounds it). Otherwise (no kernel, other steps in the head,
  CMYK, PNG...) libjpeg decodes at a reduced scale through Pillow's ``draft`` when the kept
  region allows, and one Pillow call resizes only the kept region (a CenterCrop after a Resize
  becomes that call's box), which also changes the result slightly
  (``tests/unit/vision/test_reduced_decode.py``); where no reduction applies the plain calls
  run, exactly. The reduced scale is the only part that can be switched off (``reduced=False``;
  the datasets' argument is ``reduced_decode``), which gives torchvision's numerics on every
  path.

Everything else is exact: the same random draws in the same order from the same generators,
and the same bits as running the steps one by one. Random steps draw from the generator
handed in for each image (see :mod:`flowloader.vision.transforms.rng`).

For images already in memory (MNIST, CIFAR, any array dataset) :meth:`Plan.stack_plan`
compiles the whole pipeline for a stack of them (:mod:`flowloader.vision.stack_plan`): every
step on the batch at once, each image with its own draws, bit for bit the per-sample path;
:func:`explain` says when and why a pipeline runs per sample instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from ..batching import Allocate
from . import decode, native
from .geometry import Geometry
from .native import NativeJpeg
from .stack_plan import StackPlan, compile_stack
from .transforms import functional as F
from .transforms.transforms import (
    CenterCrop,
    Normalize,
    PILToTensor,
    RandomHorizontalFlip,
    RandomVerticalFlip,
    Resize,
    ToTensor,
    call_step,
)


def explain(transform: Any, image_shape: tuple[int, ...] | None = None) -> str:
    """How an array dataset runs ``transform`` on a batch of images of ``image_shape`` ((H, W)
    or (H, W, C); any size when None): batched, or per sample and the step that is why."""
    reason = plan_for(transform).why_per_sample(image_shape)
    if reason is None:
        return "batched: every step runs on the whole stack, each image with its own draws"
    return f"per sample: {reason}"


def plan_for(transform: Any) -> Plan:
    """The plan of ``transform`` (a Compose, a single transform, or None), kept on the Compose
    and rebuilt when its list of steps changes."""
    steps = tuple(getattr(transform, "transforms", ()) if transform is not None else ())
    if transform is not None and not hasattr(transform, "transforms"):
        steps = (transform,)
    cached = getattr(transform, "_flowloader_plan", None)
    if cached is not None and cached.steps == steps:
        return cached
    plan = Plan(steps)
    if hasattr(transform, "transforms"):
        transform._flowloader_plan = plan
    return plan


class Plan:
    """The parts of one pipeline (see the module docstring)."""

    def __init__(self, steps: Sequence[Any]) -> None:
        self.steps = tuple(steps)
        self.conversion, self.normalize, tail = _conversion_of(self.steps)
        end = len(self.steps) - tail
        start = end
        if self.conversion is not None:
            while start > 0 and type(self.steps[start - 1]) in _FLIP_AXES:
                start -= 1
        self.head, self.flips = self.steps[:start], self.steps[start:end]
        self.geometry = Geometry.of(self.head)
        self.mean_std = native.normalization(self.normalize) if self.normalize else None
        # The native kernel takes a JPEG through the whole pipeline when the head is only the
        # geometry, with a filter it implements, into a conversion it writes.
        self.native_ready = (
            self.geometry is not None
            and self.geometry.consumed == len(self.head)
            and self.geometry.resample in native.FILTERS
            and self.conversion is not None
            and (self.conversion != "normalized" or self.mean_std is not None)
        )
        # Whether a step may draw: a pipeline of only fixed steps needs no generators.
        self.draws = any(type(step) not in _FIXED_STEPS for step in self.steps)
        # Its batch forms, by image shape (stack_plan), or why there is none.
        self._stacks: dict[tuple[int, ...], StackPlan | str] = {}

    @property
    def batchable(self) -> bool:
        """True if every step has a batch form for a stack of 8-bit images in memory
        (:mod:`flowloader.vision.stack_plan`); whether a given image shape is batched is
        :meth:`stack_plan`'s answer."""
        return self.why_per_sample() is None

    def stack_plan(self, image_shape: tuple[int, ...]) -> StackPlan | None:
        """The pipeline compiled for a stack of 8-bit images of ``image_shape`` ((H, W) or
        (H, W, C)), or None when it runs per sample (:meth:`why_per_sample` says why)."""
        found = self._stacks.get(tuple(image_shape))
        if found is None:
            found = self._stacks[tuple(image_shape)] = compile_stack(self.steps, image_shape)
        return found if isinstance(found, StackPlan) else None

    def why_per_sample(self, image_shape: tuple[int, ...] | None = None) -> str | None:
        """Why a stack of images of ``image_shape`` (any size when None) is not transformed
        as one batch: the step that cannot be batched and why; None when it is."""
        if image_shape is None:
            # The reasons that do not depend on the size: a crop larger than the image does.
            found = compile_stack(self.steps, (1 << 20, 1 << 20, 3))
        else:
            self.stack_plan(image_shape)
            found = self._stacks[tuple(image_shape)]
        return found if isinstance(found, str) else None

    # One image -----------------------------------------------------------------------------

    def apply(self, img: Any, rng: Any = None) -> Any:
        """The pipeline on one image: the same result as running the steps one by one."""
        img = self.run_head(img, rng)
        return self.finish(img, rng)

    def run_head(self, img: Any, rng: Any = None) -> Any:
        for step in self.head:
            img = call_step(step, img, rng)
        return img

    def load(
        self, source: str | bytes, rng: Any = None, reduced: bool = True,
        where: str | None = None, index: int | None = None,
    ) -> Any:  # fmt: skip
        """An image file (a path or its bytes) through everything before the flips, the
        geometry planned from the JPEG header when ``reduced``: a PIL image, or a
        :class:`NativeJpeg` that :meth:`finish` writes (``where`` and ``index`` name the
        sample in its errors) when the native kernel takes the whole pipeline."""
        data = decode.read(source)
        if reduced and self.native_ready and self.geometry is not None and native.available():
            job = self.geometry.native_job(data, rng, where, index)
            if job is not None:
                return job
        image = decode.open_lazily(data)
        if not reduced or self.geometry is None or image.format != "JPEG":
            return self.run_head(decode.decoded_rgb(image), rng)
        image = self.geometry.decode(image, rng)
        for step in self.head[self.geometry.consumed :]:
            image = call_step(step, image, rng)
        return image

    def finish(self, img: Any, rng: Any = None, out: np.ndarray | None = None) -> Any:
        """Flips and conversion of an image that went through the head; into ``out`` when
        given (its shape must be :meth:`output_shape`'s)."""
        if isinstance(img, NativeJpeg):
            assert self.conversion is not None  # a native job is planned only then
            return img.write(out, self.conversion, *self.native_flips(rng), self.mean_std)
        pixels = _pixels_hwc(img) if self.conversion is not None else None
        if pixels is None:  # no conversion to fuse, or not an 8-bit image: step by step
            assert out is None, "output_shape() said this image is not written whole"
            for step in self.steps[len(self.head) :]:
                img = call_step(step, img, rng)
            return img
        for axis in self._drawn_flips(rng):
            pixels = np.flip(pixels, axis)
        return self._convert(_chw(pixels), out)

    def native_flips(self, rng: Any) -> tuple[bool, bool]:
        """(horizontal, vertical): whether one image's drawn flips mirror it, for the kernel."""
        axes = self._drawn_flips(rng)
        return axes.count(1) % 2 == 1, axes.count(0) % 2 == 1

    def finish_natives(
        self, waiting: list[tuple[NativeJpeg, int, bool, bool]], out: np.ndarray
    ) -> None:
        """Native images, each (image, slot, hflip, vflip), finished into their slots of
        ``out`` in one kernel call."""
        assert self.conversion is not None
        native.write_batch(waiting, out, self.conversion, self.mean_std)

    def _drawn_flips(self, rng: Any) -> list[int]:
        """The (H, W) axes one image's flips reverse, each step drawing once, in order."""
        return [
            _FLIP_AXES[type(step)] for step in self.flips if step.generator(rng).random() < step.p
        ]

    def output_shape(self, img: Any) -> tuple[int, ...] | None:
        """The shape :meth:`finish` gives ``img``, or None if it is not written whole; read
        from the image's header, without copying its pixels (``finish`` does that once)."""
        if isinstance(img, NativeJpeg):
            return img.shape
        if self.conversion is None or not isinstance(img, Image.Image):
            return None
        return F.normalized_shape(img)

    @property
    def dtype(self) -> Any:
        return np.uint8 if self.conversion == "uint8" else np.float32

    def _convert(self, chw: np.ndarray, out: np.ndarray | None) -> np.ndarray:
        if out is None:
            out = np.empty(chw.shape, self.dtype)
        if self.conversion == "uint8":
            out[...] = chw
        elif self.conversion == "normalized":
            assert self.normalize is not None
            F.scaled_normalized_into(chw, out, self.normalize.mean, self.normalize.std)
        else:
            np.divide(chw, np.float32(255), out=out, dtype=np.float32)
        return out

    # A stack of images ---------------------------------------------------------------------

    def apply_to_stack(
        self,
        pixels: np.ndarray,
        rngs: Sequence[Any] | None,
        allocate: Allocate,
        indices: Sequence[int] | None = None,
    ) -> np.ndarray:
        """The pipeline over (N, H, W[, C]) uint8 pixels, the pixels of N PIL images (MNIST,
        CIFAR), as one batch (:class:`~flowloader.vision.stack_plan.StackPlan`), into
        ``allocate(shape, dtype)``: bit for bit the images one by one. ``rngs[k]``: image k's
        generator (None: each sample's as the per-sample path finds it, for ``indices[k]``
        when given). Raises ValueError when the plan cannot take them (:meth:`why_per_sample`
        says why)."""
        stack = self.stack_plan(pixels.shape[1:])
        if stack is None:
            raise ValueError(f"not batched: {self.why_per_sample(pixels.shape[1:])}")
        return stack.run(pixels, rngs, allocate, indices)


class BatchWriter:
    """Collects a batch's images one by one, each finished into its slot of one batch array;
    when an image does not fit (another size, not 8-bit), the batch becomes a list of separate
    images instead. Images for the native kernel wait, their flips drawn, and are written
    together by one call (:meth:`flush`, which :meth:`result` runs): the kernel then runs
    without the GIL for the whole batch, and the Python of planning the next images does
    not interleave with it. Files held for that call are bounded: past ``WAITING_BYTES`` of
    them (a batch of camera photos) the waiting images are written early."""

    def __init__(self, plan: Plan, count: int, allocate: Allocate) -> None:
        self.plan, self.count, self.allocate = plan, count, allocate
        self.array: np.ndarray | None = None
        self.separate: list[Any] | None = None
        self.added = 0
        self._waiting: list[tuple[NativeJpeg, int, bool, bool]] = []  # (image, slot, flips)
        self._waiting_bytes = 0

    def add(self, img: Any, rng: Any = None) -> None:
        plan = self.plan
        if self.separate is None:
            shape = plan.output_shape(img)
            if self.array is None and shape is not None:
                self.array = self.allocate((self.count, *shape), plan.dtype)
            if shape is not None and self.array is not None and self.array.shape[1:] == shape:
                if isinstance(img, NativeJpeg):
                    self._waiting.append((img, self.added, *plan.native_flips(rng)))
                    self._waiting_bytes += len(img.data)
                    if self._waiting_bytes >= WAITING_BYTES:
                        self.flush()
                else:
                    plan.finish(img, rng, out=self.array[self.added])
                self.added += 1
                return
            self.flush()
            done = self.array[: self.added] if self.array is not None else ()
            self.separate = [image.copy() for image in done]
        self.separate.append(plan.finish(img, rng))
        self.added += 1

    def flush(self) -> None:
        """Write the waiting native images; raises the first one's error if any fails. Run it
        before an error from a later image propagates, so that the earliest sample's error is
        the one raised, as when each image is finished as it comes."""
        if not self._waiting:
            return
        waiting, self._waiting, self._waiting_bytes = self._waiting, [], 0
        assert self.array is not None
        self.plan.finish_natives(waiting, self.array)

    def result(self) -> np.ndarray | list[Any]:
        """The batch array, or the list of images when they did not all fit one."""
        self.flush()
        if self.separate is not None:
            return self.separate
        assert self.array is not None or self.count == 0
        return self.array if self.array is not None else []


# The most JPEG bytes a BatchWriter holds for one kernel call: 64 ImageNet-sized files are
# some 7 MB, so one call per batch; 64 camera photos (1.2 MB each) take three calls.
WAITING_BYTES = 32 << 20

# Steps that never draw (any other step may).
_FIXED_STEPS = frozenset({Resize, CenterCrop, ToTensor, Normalize, PILToTensor})

# The axis of an (H, W[, C]) image that each flip reverses.
_FLIP_AXES = {RandomHorizontalFlip: 1, RandomVerticalFlip: 0}


def _conversion_of(steps: Sequence[Any]) -> tuple[str | None, Normalize | None, int]:
    """(kind, the Normalize step, how many final steps it covers) of a pipeline's end."""
    kinds = [type(step) for step in steps[-2:]]
    if kinds == [ToTensor, Normalize]:
        return "normalized", steps[-1], 2
    if kinds[-1:] == [ToTensor]:
        return "float", None, 1
    if kinds[-1:] == [PILToTensor]:
        return "uint8", None, 1
    return None, None, 0


def _pixels_hwc(img: Any) -> np.ndarray | None:
    """A PIL image's 8-bit pixels as an (H, W) or (H, W, C) array, or None for anything else
    (NumPy arrays, whose flips and conversions follow tensor layout, run step by step)."""
    if isinstance(img, Image.Image) and F.normalized_shape(img) is not None:
        return np.asarray(img)
    return None


def _chw(pixels: np.ndarray) -> np.ndarray:
    return (pixels[:, :, None] if pixels.ndim == 2 else pixels).transpose(2, 0, 1)
