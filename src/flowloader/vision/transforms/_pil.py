"""Transforms on PIL images: the same Pillow calls torchvision makes, so outputs match it."""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image, ImageEnhance, ImageOps


def dimensions(image: Image.Image) -> tuple[int, int, int]:
    """(channels, height, width)."""
    return len(image.getbands()), image.height, image.width


def to_float_chw(image: Image.Image) -> np.ndarray:
    """ToTensor: CHW float32 in [0, 1] for 8-bit modes; other modes keep their values."""
    if image.mode == "1":
        array = 255 * np.asarray(image, dtype=np.uint8)
    elif image.mode in ("I", "I;16", "F"):
        dtype = {"I": np.int32, "I;16": np.int16, "F": np.float32}[image.mode]
        array = np.asarray(image, dtype=dtype)
    else:
        array = np.asarray(image)
    array = array.reshape(image.height, image.width, -1).transpose(2, 0, 1)
    if array.dtype == np.uint8:
        return array.astype(np.float32) / np.float32(255)
    return np.ascontiguousarray(array)


def to_uint8_chw(image: Image.Image) -> np.ndarray:
    """PILToTensor: CHW with the image's own dtype (uint8 for 8-bit modes), unscaled.

    A transposed view of the pixels, as torchvision's is a permuted tensor: collating copies
    the batch once anyway, so a contiguous copy here would be a second pass."""
    return np.array(image).reshape(image.height, image.width, -1).transpose(2, 0, 1)


def resize(image: Image.Image, size_hw: tuple[int, int], resample: int) -> Image.Image:
    return image.resize((size_hw[1], size_hw[0]), resample)


def crop(image: Image.Image, top: int, left: int, height: int, width: int) -> Image.Image:
    return image.crop((left, top, left + width, top + height))


def pad(image: Image.Image, padding_ltrb: list[int], fill: Any, mode: str) -> Image.Image:
    left, top, right, bottom = padding_ltrb
    if mode == "constant":
        palette = image.getpalette() if image.mode == "P" else None
        padded = ImageOps.expand(image, border=(left, top, right, bottom), fill=_fill(fill, image))
        if palette is not None:
            padded.putpalette(palette)
        return padded
    cut = [max(-p, 0) for p in padding_ltrb]
    if any(cut):
        image = image.crop((cut[0], cut[1], image.width - cut[2], image.height - cut[3]))
    left, top, right, bottom = (max(p, 0) for p in padding_ltrb)
    array = np.asarray(image)
    widths = ((top, bottom), (left, right)) + (((0, 0),) if array.ndim == 3 else ())
    padded = Image.fromarray(np.pad(array, widths, mode=mode))  # type: ignore[call-overload]
    palette = image.getpalette() if image.mode == "P" else None
    if palette is not None:
        padded.putpalette(palette)
    return padded


def _fill(fill: Any, image: Image.Image) -> Any:
    """PIL wants an int for one band and a tuple for several."""
    return band_fill(fill, len(image.getbands()), image.mode)


def band_fill(fill: Any, bands: int, mode: str) -> Any:
    """The fill Pillow is given for an image of ``bands`` bands in ``mode``: an int for one
    band, a tuple for several."""
    if fill is None:
        fill = 0
    if isinstance(fill, (int, float)) and bands > 1:
        return tuple([int(fill)] * bands)
    if isinstance(fill, (list, tuple)):
        if len(fill) == 1:
            return tuple([int(fill[0])] * bands) if bands > 1 else int(fill[0])
        if len(fill) != bands:
            raise ValueError(f"fill has {len(fill)} values but the image has {bands} channels")
        return tuple(int(f) for f in fill)
    return int(fill) if mode != "F" else fill


def hflip(image: Image.Image) -> Image.Image:
    return image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)


def vflip(image: Image.Image) -> Image.Image:
    return image.transpose(Image.Transpose.FLIP_TOP_BOTTOM)


def to_grayscale(image: Image.Image, num_output_channels: int) -> Image.Image:
    gray = image.convert("L")
    if num_output_channels == 3:
        array = np.asarray(gray)
        return Image.fromarray(np.dstack([array, array, array]), "RGB")
    return gray


def adjust_brightness(image: Image.Image, factor: float) -> Image.Image:
    return ImageEnhance.Brightness(image).enhance(factor)


def adjust_contrast(image: Image.Image, factor: float) -> Image.Image:
    return ImageEnhance.Contrast(image).enhance(factor)


def adjust_saturation(image: Image.Image, factor: float) -> Image.Image:
    return ImageEnhance.Color(image).enhance(factor)


def adjust_hue(image: Image.Image, factor: float) -> Image.Image:
    if image.mode in {"L", "1", "I", "F"}:
        return image
    mode = image.mode
    h, s, v = image.convert("HSV").split()
    hue = np.array(h, dtype=np.uint8)
    # The shift is factor * 255 truncated toward zero, wrapped around the uint8 hue circle.
    shift = np.uint8(int(factor * 255) % 256)
    with np.errstate(over="ignore"):
        hue += shift
    return Image.merge("HSV", (Image.fromarray(hue, "L"), s, v)).convert(mode)


def parse_fill(fill: Any, image: Image.Image) -> Any:
    """torchvision's fill for Pillow's geometric transforms (``fillcolor``): one number per
    band, ints unless the image is float ("F")."""
    bands = len(image.getbands())
    if fill is None:
        fill = 0
    if isinstance(fill, (int, float)) and bands > 1:
        fill = tuple([fill] * bands)
    if isinstance(fill, (list, tuple)):
        if len(fill) == 1:
            fill = tuple(fill) * bands
        elif len(fill) != bands:
            raise ValueError(
                "The number of elements in 'fill' does not match the number of channels of "
                f"the image ({len(fill)} != {bands})"
            )
        fill = tuple(fill)
    if image.mode != "F":
        fill = tuple(int(x) for x in fill) if isinstance(fill, tuple) else int(fill)
    return fill


def affine(image: Image.Image, matrix: list[float], resample: int, fill: Any) -> Image.Image:
    """Pillow's affine transform with the inverse ``matrix`` (output to input), as
    torchvision calls it."""
    return image.transform(
        image.size, Image.Transform.AFFINE, matrix, resample, fillcolor=parse_fill(fill, image)
    )


def rotate(
    image: Image.Image, angle: float, resample: int, expand: bool, center: Any, fill: Any
) -> Image.Image:
    """Pillow's rotation, as torchvision calls it."""
    filter_ = Image.Resampling(resample)
    return image.rotate(angle, filter_, expand, center, fillcolor=parse_fill(fill, image))
