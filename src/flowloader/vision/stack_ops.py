"""The batch forms of the transforms the batch plan takes (:mod:`.stack_plan`): each step on
a whole stack of images, its random parameters drawn for every image at once, every
operation the per-sample path's on each image (see :mod:`.stack_plan` for the list), and
why a step has none (:class:`NotBatched`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from PIL import Image

from . import native, warp
from .stack_color import ColorJitterOp, GrayscaleOp
from .stack_op import MODES, NotBatched, Op, Window
from .transforms import _pil
from .transforms import functional as F
from .transforms.augment import (
    RandomAffine,
    RandomErasing,
    RandomGrayscale,
    RandomRotation,
)
from .transforms.functional import InterpolationMode
from .transforms.transforms import (
    CenterCrop,
    ColorJitter,
    Normalize,
    Pad,
    RandomCrop,
    RandomHorizontalFlip,
    RandomVerticalFlip,
    Resize,
)

__all__ = ["MODES", "Normalizing", "NotBatched", "Op", "array_op", "pixel_op"]


class _Pad(Op):
    """Pillow's constant padding (one fill per band) or NumPy's other modes, as the PIL path
    pads: ``ltrb`` non-negative."""

    def __init__(
        self, step: Any, shape: tuple[int, int, int], ltrb: Sequence[int], fill: Any, mode: str
    ) -> None:
        if mode not in ("constant", "edge", "reflect", "symmetric"):
            raise NotBatched(f"padding_mode {mode!r} is not one of Pad's (the step raises)")
        if any(p < 0 for p in ltrb):
            raise NotBatched(f"negative padding {list(ltrb)} is not batched")
        channels, height, width = shape
        self.step, self.ltrb, self.mode = step, list(ltrb), mode
        self.shape = (channels, height + ltrb[1] + ltrb[3], width + ltrb[0] + ltrb[2])
        if mode == "constant":
            try:
                band = _pil.band_fill(fill, channels, MODES[channels])
            except (TypeError, ValueError) as error:
                raise NotBatched(f"fill {fill!r} ({error})") from error
            values = band if isinstance(band, tuple) else (band,)
            if not all(isinstance(v, int) and 0 <= v <= 255 for v in values):
                raise NotBatched(f"fill {fill!r} is not 8-bit values")
            self.fill = np.array(values, np.uint8)

    def apply(self, stack: np.ndarray, params: tuple[np.ndarray, ...]) -> np.ndarray:
        left, top, right, bottom = self.ltrb
        if self.mode != "constant":
            widths = ((0, 0), (0, 0), (top, bottom), (left, right))
            return np.pad(stack, widths, mode=self.mode)  # type: ignore[call-overload]
        channels, height, width = self.shape
        # Channels-last, as the gathered pixels are: the interior is a copy in memory order,
        # and the borders are filled through rows of W * C bytes.
        out = np.empty((len(stack), height, width, channels), np.uint8)
        rows = out.reshape(len(stack), height, width * channels)
        row = np.tile(self.fill, width)
        rows[:, :top] = row
        rows[:, height - bottom :] = row
        rows[:, top : height - bottom, : left * channels] = row[: left * channels]
        rows[:, top : height - bottom, (width - right) * channels :] = row[: right * channels]
        planes = out.transpose(0, 3, 1, 2)
        planes[:, :, top : height - bottom, left : width - right] = stack
        return planes


class _RandomCrop(Op):
    """``RandomCrop``: its paddings, then a window at each image's drawn (top, left)."""

    def __init__(self, step: RandomCrop, shape: tuple[int, int, int]) -> None:
        self.step = step
        self.pads: list[_Pad] = []
        if step.padding is not None:
            self._pad(shape, F._padding_ltrb(step.padding))
        channels, height, width = self.pads[-1].shape if self.pads else shape
        th, tw = step.size
        if step.pad_if_needed and width < tw:
            self._pad((channels, height, width), [tw - width, 0, tw - width, 0])
            width += 2 * (tw - width)
        if step.pad_if_needed and height < th:
            self._pad((channels, height, width), [0, th - height, 0, th - height])
            height += 2 * (th - height)
        if height < th or width < tw:
            raise NotBatched(
                f"the crop {(th, tw)} is larger than the (padded) image {(height, width)} "
                "(the per-sample path raises the error)"
            )
        self.padded = (height, width)
        self.shape = (channels, th, tw)
        self.draws = (height, width) != (th, tw)

    def _pad(self, shape: tuple[int, int, int], ltrb: Sequence[int]) -> None:
        pad = _Pad(self.step, shape, ltrb, self.step.fill, self.step.padding_mode)
        self.pads.append(pad)

    def window(self) -> Window | None:
        fixed = None if self.draws else (0, 0)
        if not self.pads:
            return Window((0, 0), np.zeros(self.shape[0], np.uint8), fixed)
        if len(self.pads) > 1 or self.pads[0].mode != "constant":
            return None
        left, top = self.pads[0].ltrb[:2]
        return Window((top, left), self.pads[0].fill, fixed)

    def draw(self, source: Any) -> tuple[np.ndarray, ...]:
        if not self.draws:
            return ()
        (height, width), (th, tw) = self.padded, self.step.size
        top = source.integers(0, height - th + 1)
        left = source.integers(0, width - tw + 1)
        return top, left

    def apply(self, stack: np.ndarray, params: tuple[np.ndarray, ...]) -> np.ndarray:
        for pad in self.pads:
            stack = pad.apply(stack, ())
        if not self.draws:
            return stack
        top, left = params
        return windows(stack, self.shape[1:], top, left)


def windows(stack: np.ndarray, size: tuple[int, int], top: Any, left: Any) -> np.ndarray:
    """The (height, width) window at (top[k], left[k]) of each image of an (N, C, H, W)
    stack, copied into a contiguous (N, C, height, width) array by one gather."""
    views = sliding_window_view(stack, size, axis=(2, 3))  # (N, C, H', W', height, width)
    return views[np.arange(len(stack)), :, top, left]


class _CenterCrop(Op):
    """``CenterCrop``: torchvision's zero padding of a smaller image, then the central box."""

    def __init__(self, step: CenterCrop, shape: tuple[int, int, int]) -> None:
        self.step = step
        channels, height, width = shape
        th, tw = step.size
        self.pad: _Pad | None = None
        if tw > width or th > height:
            ltrb = [
                (tw - width) // 2 if tw > width else 0,
                (th - height) // 2 if th > height else 0,
                (tw - width + 1) // 2 if tw > width else 0,
                (th - height + 1) // 2 if th > height else 0,
            ]
            self.pad = _Pad(step, shape, ltrb, 0, "constant")
            channels, height, width = self.pad.shape
        self.top = round((height - th) / 2.0)
        self.left = round((width - tw) / 2.0)
        self.shape = (channels, th, tw)

    def window(self) -> Window | None:
        left, top = self.pad.ltrb[:2] if self.pad is not None else (0, 0)
        return Window((top, left), np.zeros(self.shape[0], np.uint8), (self.top, self.left))

    def apply(self, stack: np.ndarray, params: tuple[np.ndarray, ...]) -> np.ndarray:
        if self.pad is not None:
            stack = self.pad.apply(stack, ())
        th, tw = self.step.size
        return stack[:, :, self.top : self.top + th, self.left : self.left + tw]


class _Flip(Op):
    """A random flip: each image's draw ``random() < p``, then the chosen ones mirrored
    along ``axis`` of the stack."""

    draws = True

    def __init__(self, step: Any, shape: tuple[int, int, int], axis: int) -> None:
        self.step, self.shape, self.axis = step, shape, axis
        self.flip_bit = 1 if axis == 3 else 2

    def draw(self, source: Any) -> tuple[np.ndarray, ...]:
        return (source.random() < self.step.p,)

    def apply(self, stack: np.ndarray, params: tuple[np.ndarray, ...]) -> np.ndarray:
        chosen = np.flatnonzero(params[0])
        if not len(chosen):
            return stack
        # Planes in memory order first: a mirrored copy of channels-last pixels runs a byte
        # at a time, of planes a row at a time (the conversion reads them faster too).
        stack = np.ascontiguousarray(stack)
        images = stack[chosen]
        if self.axis == 3 and stack.dtype == np.uint8 and stack.shape[3] % 8 == 0:
            # A row of bytes reversed: its 8-byte words in reverse order, each byte-swapped.
            stack[chosen] = images.view(np.uint64)[..., ::-1].byteswap().view(np.uint8)
        else:
            stack[chosen] = np.flip(images, self.axis)
        return stack


class Normalizing(Op):
    """``Normalize`` in place: F.normalize's float32 operations, its checks done once."""

    def __init__(self, step: Normalize, shape: tuple[int, int, int]) -> None:
        self.step, self.shape = step, shape
        self.mean = np.asarray(step.mean, dtype=np.float32)
        self.std = np.asarray(step.std, dtype=np.float32)
        if np.any(self.std == 0):
            raise NotBatched("std is zero (the per-sample path raises the error)")
        self.mean = self.mean[:, None, None] if self.mean.ndim == 1 else self.mean
        self.std = self.std[:, None, None] if self.std.ndim == 1 else self.std
        try:
            np.broadcast_shapes(self.mean.shape, self.std.shape, shape)
        except ValueError as error:
            raise NotBatched(f"mean and std do not fit {shape} ({error})") from error
        # one number per channel (not per pixel): the step folds into a conversion's table
        self.per_channel = all(
            value.ndim < 2 or value.shape[-2:] == (1, 1) for value in (self.mean, self.std)
        )

    def apply(self, stack: np.ndarray, params: tuple[np.ndarray, ...]) -> np.ndarray:
        np.subtract(stack, self.mean, out=stack)
        np.divide(stack, self.std, out=stack)
        return stack


class _Erase(Op):
    """``RandomErasing`` on (C, H, W) arrays: torchvision's ten tries of an area and a
    log-uniform aspect ratio, drawn for every image at once (a try for the images still
    without a box), then each image's box set to the value."""

    draws = True

    def __init__(self, step: Any, shape: tuple[int, int, int]) -> None:
        if isinstance(step.value, str):
            raise NotBatched("value='random' draws normal noise, which is not batched")
        try:
            values = step.values(shape[0])
        except ValueError as error:
            raise NotBatched(f"{error} (the per-sample path raises the error)") from error
        self.step, self.shape = step, shape
        self.value = np.asarray(values, dtype=np.float32)[:, None, None]
        self.log_ratio = (math.log(step.ratio[0]), math.log(step.ratio[1]))

    def draw(self, source: Any) -> tuple[np.ndarray, ...]:
        _, height, width = self.shape
        scale = self.step.scale
        active = source.random() < self.step.p
        found = np.zeros(len(active), bool)
        boxes = np.zeros((4, len(active)), np.int64)  # i, j, h, w
        for _ in range(10):
            trying = active & ~found
            if not trying.any():
                break
            area = (height * width) * source.uniform(scale[0], scale[1], trying)
            logs = source.uniform(self.log_ratio[0], self.log_ratio[1], trying)
            # math.exp, as the per-sample path (NumPy's exp may differ in the last bit)
            exps = [math.exp(x) if on else 1.0 for x, on in zip(logs, trying, strict=True)]
            aspect = np.array(exps)
            h = np.rint(np.sqrt(area * aspect)).astype(np.int64)
            w = np.rint(np.sqrt(area / aspect)).astype(np.int64)
            fits = trying & (h < height) & (w < width)
            i = source.integers(0, np.where(fits, height - h + 1, 1), fits)
            j = source.integers(0, np.where(fits, width - w + 1, 1), fits)
            boxes[:, fits] = np.stack([i, j, h, w])[:, fits]
            found |= fits
        return found, boxes

    def apply(self, stack: np.ndarray, params: tuple[np.ndarray, ...]) -> np.ndarray:
        found, boxes = params
        for k in np.flatnonzero(found):
            i, j, h, w = boxes[:, k]
            stack[k, :, i : i + h, j : j + w] = self.value
        return stack


class _Resize(Op):
    """``Resize`` of 8-bit grey or RGB images to one size (NEAREST, BILINEAR, BICUBIC, BOX):
    Pillow's ``Image.resize`` redone on the stack (:func:`warp.resize_stack`; NEAREST as
    Pillow's scaling transform)."""

    def __init__(self, step: Resize, shape: tuple[int, int, int]) -> None:
        channels, height, width = shape
        if channels not in (1, 3):
            raise NotBatched(f"{channels}-channel images (only grey and RGB are batched)")
        self.filter = F.pil_filter(step.interpolation)
        if self.filter != Image.Resampling.NEAREST and self.filter not in warp.RESAMPLE_FILTERS:
            raise NotBatched(f"{step.interpolation.value} interpolation (not batched)")
        try:
            out_h, out_w = F.resized_output_size(height, width, step.size, step.max_size)
        except (TypeError, ValueError) as error:
            raise NotBatched(f"{error} (the per-sample path raises the error)") from error
        self.step, self.shape = step, (channels, out_h, out_w)
        self.same = (out_h, out_w) == (height, width)

    def apply(self, stack: np.ndarray, params: tuple[np.ndarray, ...]) -> np.ndarray:
        if self.same:
            return stack
        _, out_h, out_w = self.shape
        if self.filter == Image.Resampling.NEAREST:
            return warp.nearest_resize(stack, (out_h, out_w))
        return warp.resize_stack(stack, (out_h, out_w), self.filter, native.PILLOW_ORDER)


class _Affine(Op):
    """``RandomAffine`` and ``RandomRotation`` (no ``expand``) on 8-bit grey or RGB images,
    NEAREST or BILINEAR: each image's parameters drawn in torchvision's order, its matrix
    made as the per-sample path makes it, and Pillow's transform of every image at once
    (:mod:`flowloader.vision.warp`)."""

    draws = True

    def __init__(self, step: Any, shape: tuple[int, int, int]) -> None:
        channels = shape[0]
        if channels not in (1, 3):
            raise NotBatched(f"{channels}-channel images (only grey and RGB are batched)")
        if step.interpolation not in (InterpolationMode.NEAREST, InterpolationMode.BILINEAR):
            raise NotBatched(f"{step.interpolation.value} interpolation (not batched)")
        if getattr(step, "expand", False):
            raise NotBatched("expand=True gives images of different sizes")
        try:
            fill = _pil.parse_fill(step.fill, Image.new(MODES[channels], (1, 1)))
        except (TypeError, ValueError) as error:
            raise NotBatched(f"fill {step.fill!r} ({error})") from error
        values = fill if isinstance(fill, tuple) else (fill,)
        if not all(0 <= v <= 255 for v in values):
            raise NotBatched(f"fill {step.fill!r} is not 8-bit values")
        self.step, self.shape, self.fill = step, shape, values
        self.rotation = isinstance(step, RandomRotation)
        self.bilinear = step.interpolation == InterpolationMode.BILINEAR

    def draw(self, source: Any) -> tuple[np.ndarray, ...]:
        step, (_, height, width) = self.step, self.shape
        angle = source.uniform(step.degrees[0], step.degrees[1])
        if self.rotation:
            return (angle,)
        zeros = np.zeros_like(angle)
        tx = ty = zeros.astype(np.int64)
        if step.translate is not None:
            max_dx = float(step.translate[0] * width)
            max_dy = float(step.translate[1] * height)
            tx = np.rint(source.uniform(-max_dx, max_dx)).astype(np.int64)
            ty = np.rint(source.uniform(-max_dy, max_dy)).astype(np.int64)
        scale = zeros + 1.0 if step.scale is None else source.uniform(*step.scale)
        shear_x = shear_y = zeros
        if step.shear is not None:
            shear_x = source.uniform(step.shear[0], step.shear[1])
            if len(step.shear) == 4:
                shear_y = source.uniform(step.shear[2], step.shear[3])
        return angle, tx, ty, scale, shear_x, shear_y

    def _one(self, params: tuple[Any, ...], k: int) -> tuple[Any, ...]:
        """Image k's arguments to F.rotate / F.affine, as the per-sample path passes them
        (``params`` as lists of Python numbers)."""
        if self.rotation:
            return (params[0][k],)
        angle, tx, ty, scale, shear_x, shear_y = (p[k] for p in params)
        return angle, [tx, ty], scale, [shear_x, shear_y]

    def _by_pillow(self, stack: np.ndarray, params: tuple[Any, ...], k: int) -> np.ndarray:
        step, image, args = self.step, warp.pillow_image(stack[k]), self._one(params, k)
        mode, fill, center = step.interpolation, step.fill, step.center
        if self.rotation:
            done = F.rotate(image, args[0], mode, False, center, fill)
        else:
            done = F.affine(image, args[0], args[1], args[2], args[3], mode, fill, center)
        return np.asarray(done).reshape(*stack.shape[2:], -1).transpose(2, 0, 1)

    def apply(self, stack: np.ndarray, params: tuple[np.ndarray, ...]) -> np.ndarray:
        _, height, width = self.shape
        center = self.step.center
        params = tuple(p.tolist() for p in params)  # Python numbers, as the per-sample path
        special = []
        if self.rotation:
            matrices = np.empty((len(stack), 6))
            for k, angle in enumerate(params[0]):
                matrix = warp.pillow_rotation_matrix(angle, width, height, center)
                if matrix is None:  # Pillow's copy or transpose of a right angle
                    special.append(k)
                    matrix = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
                matrices[k] = matrix
        else:
            angle, tx, ty, scale, shear_x, shear_y = params
            pivot = [width * 0.5, height * 0.5] if center is None else center
            matrices = warp.affine_matrices(angle, (tx, ty), scale, (shear_x, shear_y), pivot)
        out = warp.warp_stack(
            stack, matrices, self.bilinear, self.fill, lambda k: self._by_pillow(stack, params, k)
        )
        for k in special:
            out[k] = self._by_pillow(stack, params, k)
        return out


def pixel_op(step: Any, shape: tuple[int, int, int]) -> Op:
    """The batch form of a step on 8-bit PIL images of ``shape``."""
    kind = type(step)
    if kind is RandomCrop:
        return _RandomCrop(step, shape)
    if kind is Pad:
        return _Pad(step, shape, F._padding_ltrb(step.padding), step.fill, step.padding_mode)
    if kind is CenterCrop:
        return _CenterCrop(step, shape)
    if kind is RandomHorizontalFlip:
        return _Flip(step, shape, 3)
    if kind is RandomVerticalFlip:
        return _Flip(step, shape, 2)
    if kind is RandomGrayscale:
        return GrayscaleOp(step, shape)
    if kind in (RandomAffine, RandomRotation):
        return _Affine(step, shape)
    if kind is ColorJitter:
        return ColorJitterOp(step, shape)
    if kind is Resize:
        return _Resize(step, shape)
    if kind is Normalize:
        raise NotBatched("Normalize of a PIL image (the per-sample path raises the error)")
    raise NotBatched(_no_batch_form(step))


def array_op(step: Any, shape: tuple[int, int, int], conversion: str) -> Op:
    """The batch form of a step on (C, H, W) arrays after the conversion."""
    kind = type(step)
    if kind is Normalize and conversion != "uint8":
        return Normalizing(step, shape)
    if kind is RandomErasing:
        return _Erase(step, shape)
    if kind is RandomHorizontalFlip:
        return _Flip(step, shape, 3)
    if kind is RandomVerticalFlip:
        return _Flip(step, shape, 2)
    if kind is Normalize:
        raise NotBatched("Normalize of a uint8 array (the per-sample path raises the error)")
    raise NotBatched(_no_batch_form(step) + " after the conversion")


def _no_batch_form(step: Any) -> str:
    if type(step).__module__.startswith("flowloader."):
        return f"{type(step).__name__} has no batch form"
    return f"{type(step).__name__} is not a flowloader transform (it runs on each image)"
