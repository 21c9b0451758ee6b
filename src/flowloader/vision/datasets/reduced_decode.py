"""Decode a JPEG at reduced scale when the first transform would shrink it anyway.

For ``Compose([RandomResizedCrop(...) or Resize(...), ...])`` the crop box and output size are
known from the JPEG header alone (the crop is drawn with the same random numbers as the plain
path). libjpeg can decode at 1/2, 1/4 or 1/8 scale (DCT scaling, Pillow's ``draft``) for far
less work; we pick the smallest scale that still leaves at least the output resolution, then
resize from the reduced image with the crop box mapped into it. The result differs slightly
from decoding at full size (see docs and tests for the bound); when no reduction applies the
path is exactly the plain one.
"""

from __future__ import annotations

import math
from typing import Any

from PIL import Image

from ..transforms import functional as F
from ..transforms.transforms import Compose, RandomResizedCrop, Resize

REDUCTIONS = (8, 4, 2)


def _first_step(transform: Any) -> tuple[Any, list[Any]] | None:
    steps = getattr(transform, "transforms", None)
    if not steps or type(steps[0]) not in (RandomResizedCrop, Resize):
        return None
    return steps[0], list(steps[1:])


def applies(transform: Any) -> bool:
    return _first_step(transform) is not None


def load_and_transform(path: str, transform: Any) -> tuple[Any, Any] | None:
    """(image after the first step, the remaining transform), or None if not a JPEG."""
    first, rest = _first_step(transform)  # type: ignore[misc]
    with open(path, "rb") as stream:
        image = Image.open(stream)
        if image.format != "JPEG":
            return None
        width, height = image.size
        if isinstance(first, RandomResizedCrop):
            top, left, h, w = first.get_params(image, first.scale, first.ratio, first.rng)
            out_h, out_w = first.size
            box = (left, top, left + w, top + h)
        else:
            out_h, out_w = F.resized_output_size(height, width, first.size, first.max_size)
            top, left, h, w = 0, 0, height, width
            box = (0, 0, width, height)
        resample = F.pil_filter(first.interpolation)
        factor = min(w / out_w, h / out_h)
        reduction = next((r for r in REDUCTIONS if r <= factor), 1)
        if reduction > 1:
            image.draft("RGB", (math.ceil(width / reduction), math.ceil(height / reduction)))
        image = image.convert("RGB")
    if image.size == (width, height):  # no reduction: exactly the plain path
        if isinstance(first, RandomResizedCrop):
            image = F.resized_crop(image, top, left, h, w, first.size, first.interpolation)
        elif (out_h, out_w) != (height, width):
            image = image.resize((out_w, out_h), resample)
    else:
        sx, sy = image.width / width, image.height / height
        scaled = (box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy)
        image = image.resize((out_w, out_h), resample, box=scaled)
    return image, Compose(rest) if rest else None
