"""Plan a JPEG's first resize from its header: decode at reduced scale, crop and resize in one
Pillow call.

For ``Compose([RandomResizedCrop(...), ...])``, ``Compose([Resize(...), ...])`` and
``Compose([Resize(...), CenterCrop(...), ...])`` the region of the image that survives and the
output size are known from the JPEG header alone (a random crop is drawn with the same random
numbers as the plain path). libjpeg can decode at 1/2, 1/4 or 1/8 scale (DCT scaling, Pillow's
``draft``) for less work; we pick the smallest scale that still leaves at least the output
resolution, then resize from the decoded image with the region mapped into it. A CenterCrop
after a Resize becomes that call's box, so only the kept pixels are computed. Both change the
result slightly (docs and tests give the bound); a RandomResizedCrop or Resize that needs no
reduction takes exactly the plain path.
"""

from __future__ import annotations

import math
from typing import Any

from PIL import Image

from ..transforms import functional as F
from ..transforms.transforms import CenterCrop, Compose, RandomResizedCrop, Resize

REDUCTIONS = (8, 4, 2)


def applies(transform: Any) -> bool:
    steps = getattr(transform, "transforms", None)
    return bool(steps) and type(steps[0]) in (RandomResizedCrop, Resize)


def load_and_transform(path: str, transform: Any) -> tuple[Any, Any] | None:
    """(image after the planned first steps, the remaining transform), or None if not a JPEG."""
    first, *rest = transform.transforms
    with open(path, "rb") as stream:
        image = Image.open(stream)
        if image.format != "JPEG":
            return None
        width, height = image.size
        fused = False
        if isinstance(first, RandomResizedCrop):
            top, left, h, w = first.get_params(image, first.scale, first.ratio, first.rng)
            out_h, out_w = first.size
            box = (left, top, left + w, top + h)
        else:
            out_h, out_w = F.resized_output_size(height, width, first.size, first.max_size)
            box = (0, 0, width, height)
            crop = rest[0].size if rest and type(rest[0]) is CenterCrop else None
            if crop is not None and crop[0] <= out_h and crop[1] <= out_w:  # no padding needed
                box, (out_h, out_w) = _center_crop_box(width, height, out_h, out_w, crop), crop
                fused, rest = True, rest[1:]
        factor = min((box[2] - box[0]) / out_w, (box[3] - box[1]) / out_h)
        reduction = next((r for r in REDUCTIONS if r <= factor), 1)
        if reduction > 1:
            image.draft("RGB", (math.ceil(width / reduction), math.ceil(height / reduction)))
        image = decoded_rgb(image)
    resample = F.pil_filter(first.interpolation)
    if image.size == (width, height) and not fused:  # no reduction: exactly the plain path
        if isinstance(first, RandomResizedCrop):
            image = F.resized_crop(image, top, left, h, w, first.size, first.interpolation)
        elif (out_h, out_w) != (height, width):
            image = image.resize((out_w, out_h), resample)
    else:
        sx, sy = image.width / width, image.height / height
        scaled = (box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy)
        image = image.resize((out_w, out_h), resample, box=scaled)
    return image, Compose(rest) if rest else None


def decoded_rgb(image: Image.Image) -> Image.Image:
    """``image`` decoded as RGB: the same pixels as ``convert("RGB")``, without its copy when
    the image already is RGB (most JPEGs)."""
    if image.mode == "RGB":
        image.load()
        return image
    return image.convert("RGB")


def _center_crop_box(
    width: int, height: int, resized_h: int, resized_w: int, crop: tuple[int, int]
) -> tuple[float, float, float, float]:
    """The region of the original image that Resize to (resized_h, resized_w) followed by
    CenterCrop(crop) keeps (torchvision's rounding of the crop offset)."""
    crop_h, crop_w = crop
    top, left = round((resized_h - crop_h) / 2.0), round((resized_w - crop_w) / 2.0)
    sx, sy = width / resized_w, height / resized_h
    return (left * sx, top * sy, (left + crop_w) * sx, (top + crop_h) * sy)
