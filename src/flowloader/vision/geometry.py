"""A pipeline's first resize (``RandomResizedCrop``, ``Resize``, ``Resize`` + ``CenterCrop``)
planned from a JPEG's header: as a job for the native kernel, or as Pillow calls on a file
decoded at a reduced scale. Either way the random draws are the step's own, in its order.
See the module docstring of :mod:`flowloader.vision.plan`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from PIL import Image

from . import decode, native
from .native import Axis, NativeJpeg
from .transforms import functional as F
from .transforms import rng as _rng
from .transforms.transforms import CenterCrop, RandomResizedCrop, Resize, crop_box

# The native kernel decodes at a reduced scale only while at least this many decoded pixels
# remain per output pixel, so that its antialiased resize still averages as the full-scale
# one does (measured on 2048x1536 photos, RandomResizedCrop 224: a mean difference of 1.1
# levels at 1.0, 0.6 at 1.5, 0.4 at 2.0; decode time +10% and +25%).
NATIVE_DECODED_PER_OUTPUT = 1.5


class Geometry:
    """A pipeline's first resize, planned from a JPEG's header (see the module docstring)."""

    def __init__(self, first: Any, crop: CenterCrop | None) -> None:
        self.first, self.crop = first, crop
        self.consumed = 1 if crop is None else 2
        self.resample = int(F.pil_filter(first.interpolation))

    @staticmethod
    def of(head: Sequence[Any]) -> Geometry | None:
        if not head or type(head[0]) not in (RandomResizedCrop, Resize):
            return None
        crop = head[1] if len(head) > 1 and type(head[0]) is Resize else None
        return Geometry(head[0], crop if type(crop) is CenterCrop else None)

    def native_job(
        self, data: bytes, rng: Any, where: str | None, index: int | None
    ) -> NativeJpeg | None:
        """The native kernel's job for a JPEG's bytes, with the same random draws as
        :meth:`decode`; None (before any draw) when the kernel cannot take this file."""
        header = native.header(data)
        if (
            header is None
            or not header.supported
            or not header.fits_kernel_memory()
            or _too_many_pixels(header)
        ):
            return None
        width, height = header.width, header.height
        first = self.first
        if isinstance(first, RandomResizedCrop):
            draw = _rng.resolve(None, first.generator(rng))
            top, left, h, w = crop_box(height, width, first.scale, first.ratio, draw)
            out_h, out_w = first.size
            x = Axis(w, 0.0, float(w), out_w, 0, out_w, left)
            y = Axis(h, 0.0, float(h), out_h, 0, out_h, top)
        else:
            out_h, out_w = F.resized_output_size(height, width, first.size, first.max_size)
            x = Axis(width, 0.0, float(width), out_w, 0, out_w)
            y = Axis(height, 0.0, float(height), out_h, 0, out_h)
            if self.crop is not None:
                crop_h, crop_w = self.crop.size
                if crop_h > out_h or crop_w > out_w:  # the crop pads: the Pillow path
                    return None
                x = x._replace(start=_center_offset(out_w, crop_w), kept=crop_w)
                y = y._replace(start=_center_offset(out_h, crop_h), kept=crop_h)
        reduction = decode.reduction_for(min(_scale(x), _scale(y)) / NATIVE_DECODED_PER_OUTPUT)
        if reduction > 1:
            x, y = _reduced(x, reduction, width), _reduced(y, reduction, height)
        return NativeJpeg(data, reduction, x, y, self.resample, where, index)

    def decode(self, image: Image.Image, rng: Any) -> Image.Image:
        """A lazily opened JPEG decoded and put through the planned step(s)."""
        first = self.first
        width, height = image.size
        if isinstance(first, RandomResizedCrop):
            top, left, h, w = first.get_params(
                image, first.scale, first.ratio, first.generator(rng)
            )
            out_h, out_w = first.size
            box: tuple[float, float, float, float] = (left, top, left + w, top + h)
        else:
            out_h, out_w = F.resized_output_size(height, width, first.size, first.max_size)
            box = (0, 0, width, height)
        reduction = decode.reduction_for(min((box[2] - box[0]) / out_w, (box[3] - box[1]) / out_h))
        # With a reduced decode, Resize + CenterCrop become one resize of the kept region (a
        # crop larger than the resized image pads: then it runs as itself, afterwards).
        crop = self.crop
        fused = (
            crop is not None and reduction > 1 and crop.size[0] <= out_h and crop.size[1] <= out_w
        )
        if crop is not None and fused:
            box = _center_crop_box(width, height, out_h, out_w, crop.size)
            out_h, out_w = crop.size
        image = decode.decode_reduced(image, reduction)
        resample = F.pil_filter(first.interpolation)
        if image.size == (width, height) and not fused:  # no reduction: exactly the plain path
            if isinstance(first, RandomResizedCrop):
                image = F.resized_crop(image, top, left, h, w, first.size, first.interpolation)
            elif (out_h, out_w) != (height, width):
                image = image.resize((out_w, out_h), resample)
        else:
            scale = _decoded_scale(width, image.width)
            scaled = (box[0] / scale, box[1] / scale, box[2] / scale, box[3] / scale)
            image = image.resize((out_w, out_h), resample, box=scaled)
        if self.crop is not None and not fused:
            image = self.crop(image)
        return image


def _center_crop_box(
    width: int, height: int, resized_h: int, resized_w: int, crop: tuple[int, int]
) -> tuple[float, float, float, float]:
    """The region of the original image that Resize to (resized_h, resized_w) followed by
    CenterCrop(crop) keeps (torchvision's rounding of the crop offset)."""
    crop_h, crop_w = crop
    top, left = _center_offset(resized_h, crop_h), _center_offset(resized_w, crop_w)
    sx, sy = width / resized_w, height / resized_h
    return (left * sx, top * sy, (left + crop_w) * sx, (top + crop_h) * sy)


def _center_offset(size: int, crop: int) -> int:
    """Where CenterCrop starts a crop of ``crop`` pixels in ``size`` (torchvision's
    rounding)."""
    return round((size - crop) / 2.0)


def _decoded_scale(full: int, decoded: int) -> int:
    """The DCT scale (1, 2, 4 or 8) that decoded ``full`` pixels into ``decoded``: Pillow's
    draft can choose a smaller one than asked for. Pixel x of the image is then x / scale of
    the decoded one (libjpeg's geometry, as :func:`_reduced` has it for the kernel). A smaller
    scale gives the same size only when the one used exceeds ``full``, which no reduction
    does: the smallest match is the one used."""
    return next(s for s in (1, 2, 4, 8) if -(-full // s) == decoded)


def _too_many_pixels(header: native.Header) -> bool:
    """More pixels than Pillow opens without a DecompressionBombWarning: Pillow then warns
    or refuses, as it always has."""
    limit = Image.MAX_IMAGE_PIXELS
    return limit is not None and header.width * header.height > limit


def _scale(axis: Axis) -> float:
    """Input pixels per output pixel along ``axis``."""
    return (axis.in1 - axis.in0) / axis.out_size


def _reduced(axis: Axis, reduction: int, full: int) -> Axis:
    """``axis`` on the image decoded at 1/``reduction`` scale (``full``: the axis's size at
    full scale): the pixels that hold its image, and its box in them (fractional)."""
    lo, hi = axis.origin / reduction, (axis.origin + axis.in_size) / reduction
    origin = math.floor(lo)
    end = min(math.ceil(hi), math.ceil(full / reduction))
    in0 = (axis.origin + axis.in0) / reduction - origin
    in1 = min((axis.origin + axis.in1) / reduction - origin, end - origin)
    return Axis(end - origin, in0, in1, axis.out_size, axis.start, axis.kept, origin)
