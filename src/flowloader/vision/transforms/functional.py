"""Image operations with torchvision's functional names, on PIL images and NumPy arrays.

A PIL image goes through the same Pillow calls torchvision makes; a NumPy array is treated
like a torchvision tensor, laid out (..., C, H, W).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from enum import Enum
from typing import Any

import numpy as np
from PIL import Image

from . import _array, _pil


class InterpolationMode(Enum):
    """The resampling filters, by torchvision's names (``Resize(..., interpolation=...)``)."""

    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


_PIL_FILTERS = {
    InterpolationMode.NEAREST: Image.Resampling.NEAREST,
    InterpolationMode.NEAREST_EXACT: Image.Resampling.NEAREST,
    InterpolationMode.BILINEAR: Image.Resampling.BILINEAR,
    InterpolationMode.BICUBIC: Image.Resampling.BICUBIC,
    InterpolationMode.BOX: Image.Resampling.BOX,
    InterpolationMode.HAMMING: Image.Resampling.HAMMING,
    InterpolationMode.LANCZOS: Image.Resampling.LANCZOS,
}
_FROM_PIL = {int(v): k for k, v in reversed(list(_PIL_FILTERS.items()))}


def interpolation_mode(value: Any) -> InterpolationMode:
    """An InterpolationMode from itself or from a Pillow resampling constant."""
    if isinstance(value, InterpolationMode):
        return value
    if isinstance(value, int) and value in _FROM_PIL:
        return _FROM_PIL[value]
    raise TypeError(
        "interpolation should be an InterpolationMode or a corresponding Pillow integer constant, "
        f"but got {value!r}"
    )


def pil_filter(interpolation: Any) -> int:
    """The Pillow resampling filter for an interpolation mode (or Pillow constant)."""
    return _PIL_FILTERS[interpolation_mode(interpolation)]


def _is_pil(img: Any) -> bool:
    return isinstance(img, Image.Image)


def _check_image(img: Any) -> None:
    if not (_is_pil(img) or isinstance(img, np.ndarray)):
        raise TypeError(f"img should be a PIL Image or a NumPy array, got {type(img).__name__}")


def get_dimensions(img: Any) -> list[int]:
    """[channels, height, width]."""
    _check_image(img)
    return list(_pil.dimensions(img) if _is_pil(img) else _array.dimensions(img))


def _chw_view(pixels: np.ndarray) -> np.ndarray:
    """An (H, W) or (H, W, C) array as a (C, H, W) view, no copy."""
    return (pixels[:, :, None] if pixels.ndim == 2 else pixels).transpose(2, 0, 1)


def to_tensor(pic: Any) -> np.ndarray:
    """A PIL image or an HWC array -> CHW float32 array; 8-bit data is scaled to [0, 1]."""
    if _is_pil(pic):
        return _pil.to_float_chw(pic)
    if not isinstance(pic, np.ndarray):
        raise TypeError(f"pic should be a PIL Image or a NumPy array, got {type(pic).__name__}")
    if pic.ndim not in (2, 3):
        raise ValueError(f"pic should be 2 or 3 dimensional, got {pic.ndim} dimensions")
    chw = _chw_view(pic)
    if pic.dtype == np.uint8:
        return chw.astype(np.float32) / np.float32(255)
    return np.ascontiguousarray(chw)


_EIGHT_BIT_MODES = ("L", "RGB", "RGBA", "CMYK", "YCbCr", "LA", "P")


def _is_eight_bit(pic: Any) -> bool:
    """A PIL image in an 8-bit mode, or an HWC uint8 array."""
    if _is_pil(pic):
        return pic.mode in _EIGHT_BIT_MODES
    return isinstance(pic, np.ndarray) and pic.dtype == np.uint8 and pic.ndim in (2, 3)


def normalized_shape(pic: Any) -> tuple[int, int, int] | None:
    """The CHW shape fused ToTensor + Normalize writes for an 8-bit image, or None when
    ``pic`` is not one (without decoding or copying anything)."""
    if not _is_eight_bit(pic):
        return None
    if _is_pil(pic):
        return _pil.dimensions(pic)
    return (1 if pic.ndim == 2 else pic.shape[2]), pic.shape[0], pic.shape[1]


def scaled_normalized_into(
    pixels: np.ndarray, out: np.ndarray, mean: Sequence[float], std: Sequence[float]
) -> np.ndarray:
    """``(pixels / 255 - mean) / std`` for uint8 (..., C, H, W) pixels, written into float32
    ``out``: the one sequence of float32 operations that fused ToTensor + Normalize runs, per
    image and per batch, so that both are bit-identical to the two steps apart."""
    np.divide(pixels, np.float32(255), out=out, dtype=np.float32)
    return normalize(out, mean, std, inplace=True)


def pil_to_tensor(pic: Any) -> np.ndarray:
    """A PIL image (or an HWC array) -> CHW array of the same dtype, not scaled."""
    if _is_pil(pic):
        return _pil.to_uint8_chw(pic)
    if isinstance(pic, np.ndarray) and pic.ndim in (2, 3):
        return np.ascontiguousarray(_chw_view(pic))
    raise TypeError(f"pic should be a PIL Image or an HWC NumPy array, got {type(pic).__name__}")


def normalize(
    tensor: np.ndarray, mean: Sequence[float], std: Sequence[float], inplace: bool = False
) -> np.ndarray:
    """(tensor - mean) / std per channel, on (..., C, H, W) float arrays (batches too)."""
    if not isinstance(tensor, np.ndarray):
        raise TypeError(f"tensor should be a NumPy array, got {type(tensor).__name__}")
    if not np.issubdtype(tensor.dtype, np.floating):
        raise TypeError(f"Input tensor should be a float array. Got {tensor.dtype}.")
    if tensor.ndim < 3:
        raise ValueError(
            "Expected tensor to be a tensor image of size (..., C, H, W). "
            f"Got shape {tensor.shape}."
        )
    mean_array = np.asarray(mean, dtype=tensor.dtype)
    std_array = np.asarray(std, dtype=tensor.dtype)
    if np.any(std_array == 0):
        raise ValueError(
            f"std evaluated to zero after conversion to {tensor.dtype}, "
            "leading to division by zero."
        )
    if mean_array.ndim == 1:
        mean_array = mean_array[:, None, None]
    if std_array.ndim == 1:
        std_array = std_array[:, None, None]
    if inplace:
        np.subtract(tensor, mean_array, out=tensor)
        np.divide(tensor, std_array, out=tensor)
        return tensor
    return (tensor - mean_array) / std_array


def resized_output_size(
    height: int, width: int, size: int | Sequence[int], max_size: int | None = None
) -> tuple[int, int]:
    """torchvision's rule: an int (or 1-sequence) matches the shorter edge, keeping the aspect
    ratio and capping the longer edge at ``max_size``; an (h, w) pair is taken as is."""
    if isinstance(size, Sequence):
        if len(size) not in (1, 2):
            raise ValueError(
                "Size must be an int or a 1 or 2 element tuple/list, "
                f"not a {len(size)} element tuple/list"
            )
        if max_size is not None and len(size) != 1:
            raise ValueError(
                "max_size should only be passed if size specifies the length of the smaller edge, "
                "i.e. size should be an int or a sequence of length 1 in torchscript mode."
            )
        if len(size) == 2:
            return int(size[0]), int(size[1])
        size = size[0]
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = int(size), int(int(size) * long / short)
    if max_size is not None:
        if max_size <= size:
            raise ValueError(
                f"max_size = {max_size} must be strictly greater than the requested size for "
                f"the smaller edge size = {size}"
            )
        if new_long > max_size:
            new_short, new_long = int(max_size * new_short / new_long), max_size
    new_w, new_h = (new_short, new_long) if width <= height else (new_long, new_short)
    return new_h, new_w


def resize(
    img: Any,
    size: int | Sequence[int],
    interpolation: Any = InterpolationMode.BILINEAR,
    max_size: int | None = None,
    antialias: bool | None = True,
) -> Any:
    """Resize to ``size`` (see :func:`resized_output_size`). PIL always antialiases."""
    _check_image(img)
    mode = interpolation_mode(interpolation)
    _, height, width = get_dimensions(img)
    output = resized_output_size(height, width, size, max_size)
    if output == (height, width):
        return img
    if _is_pil(img):
        return _pil.resize(img, output, _PIL_FILTERS[mode])
    return _array.resize(img, output, _PIL_FILTERS[mode])


def crop(img: Any, top: int, left: int, height: int, width: int) -> Any:
    """The (height, width) box at (top, left); outside the image is zero."""
    _check_image(img)
    if _is_pil(img):
        return _pil.crop(img, top, left, height, width)
    return _array.crop(img, top, left, height, width)


def size_pair(size: Any, name: str = "size") -> tuple[int, int]:
    """(h, w) from an int, a 1-sequence or a 2-sequence."""
    if isinstance(size, numbers.Real):
        return int(size), int(size)  # type: ignore[call-overload]
    if isinstance(size, Sequence) and len(size) == 1:
        return int(size[0]), int(size[0])
    if isinstance(size, Sequence) and len(size) == 2:
        return int(size[0]), int(size[1])
    raise ValueError(f"Please provide only two dimensions (h, w) for {name}, got {size!r}")


def center_crop(img: Any, output_size: Any) -> Any:
    """The central crop; an image smaller than the crop is first padded with zeros."""
    crop_height, crop_width = size_pair(output_size)
    _, height, width = get_dimensions(img)
    if crop_width > width or crop_height > height:
        padding = [
            (crop_width - width) // 2 if crop_width > width else 0,
            (crop_height - height) // 2 if crop_height > height else 0,
            (crop_width - width + 1) // 2 if crop_width > width else 0,
            (crop_height - height + 1) // 2 if crop_height > height else 0,
        ]
        img = pad(img, padding, fill=0)
        _, height, width = get_dimensions(img)
        if (crop_height, crop_width) == (height, width):
            return img
    top = round((height - crop_height) / 2.0)
    left = round((width - crop_width) / 2.0)
    return crop(img, top, left, crop_height, crop_width)


def _padding_ltrb(padding: Any) -> list[int]:
    if isinstance(padding, numbers.Real):
        return [int(padding)] * 4  # type: ignore[call-overload]
    if isinstance(padding, Sequence) and len(padding) in (1, 2, 4):
        values = [int(p) for p in padding]
        if len(values) == 1:
            return values * 4
        if len(values) == 2:
            return [values[0], values[1], values[0], values[1]]
        return values
    raise ValueError(f"Padding must be an int or a 1, 2, or 4 element tuple, not {padding!r}")


def pad(img: Any, padding: Any, fill: Any = 0, padding_mode: str = "constant") -> Any:
    """Pad the borders: ``padding`` is one int, (left/right, top/bottom) or (l, t, r, b)."""
    _check_image(img)
    if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
        raise ValueError("Padding mode should be either constant, edge, reflect or symmetric")
    ltrb = _padding_ltrb(padding)
    if _is_pil(img):
        return _pil.pad(img, ltrb, fill, padding_mode)
    return _array.pad(img, ltrb, fill, padding_mode)


def resized_crop(
    img: Any,
    top: int,
    left: int,
    height: int,
    width: int,
    size: Any,
    interpolation: Any = InterpolationMode.BILINEAR,
    antialias: bool | None = True,
) -> Any:
    img = crop(img, top, left, height, width)
    return resize(img, list(size_pair(size)), interpolation, antialias=antialias)


def hflip(img: Any) -> Any:
    _check_image(img)
    return _pil.hflip(img) if _is_pil(img) else _array.hflip(img)


def vflip(img: Any) -> Any:
    _check_image(img)
    return _pil.vflip(img) if _is_pil(img) else _array.vflip(img)


def rgb_to_grayscale(img: Any, num_output_channels: int = 1) -> Any:
    if num_output_channels not in (1, 3):
        raise ValueError("num_output_channels should be either 1 or 3")
    _check_image(img)
    if _is_pil(img):
        return _pil.to_grayscale(img, num_output_channels)
    return _array.rgb_to_grayscale(img, num_output_channels)


to_grayscale = rgb_to_grayscale


def _adjust(name: str, img: Any, factor: float) -> Any:
    _check_image(img)
    backend = _pil if _is_pil(img) else _array
    return getattr(backend, name)(img, factor)


def adjust_brightness(img: Any, brightness_factor: float) -> Any:
    if brightness_factor < 0:
        raise ValueError(f"brightness_factor ({brightness_factor}) is not non-negative.")
    return _adjust("adjust_brightness", img, brightness_factor)


def adjust_contrast(img: Any, contrast_factor: float) -> Any:
    if contrast_factor < 0:
        raise ValueError(f"contrast_factor ({contrast_factor}) is not non-negative.")
    return _adjust("adjust_contrast", img, contrast_factor)


def adjust_saturation(img: Any, saturation_factor: float) -> Any:
    if saturation_factor < 0:
        raise ValueError(f"saturation_factor ({saturation_factor}) is not non-negative.")
    return _adjust("adjust_saturation", img, saturation_factor)


def adjust_hue(img: Any, hue_factor: float) -> Any:
    if not -0.5 <= hue_factor <= 0.5:
        raise ValueError(f"hue_factor ({hue_factor}) is not in [-0.5, 0.5].")
    return _adjust("adjust_hue", img, hue_factor)


def erase(
    img: np.ndarray, i: int, j: int, h: int, w: int, v: Any, inplace: bool = False
) -> np.ndarray:
    """Set the (h, w) box at (i, j) of a (..., C, H, W) array to ``v`` (broadcast to it)."""
    if not isinstance(img, np.ndarray):
        raise TypeError(f"img should be a NumPy array (tensor image). Got {type(img).__name__}")
    if not inplace:
        img = img.copy()
    img[..., i : i + h, j : j + w] = v
    return img


def inverse_affine_matrix(
    center: Sequence[float],
    angle: float,
    translate: Sequence[float],
    scale: float,
    shear: Sequence[float],
) -> list[float]:
    """torchvision's inverse affine matrix (output to input coordinates): a rotation by
    ``angle`` and shear about ``center``, scaled, then translated; the same float64 steps."""
    rot = math.radians(angle)
    sx, sy = math.radians(shear[0]), math.radians(shear[1])
    cx, cy = center
    tx, ty = translate
    a = math.cos(rot - sy) / math.cos(sy)
    b = -math.cos(rot - sy) * math.tan(sx) / math.cos(sy) - math.sin(rot)
    c = math.sin(rot - sy) / math.cos(sy)
    d = -math.sin(rot - sy) * math.tan(sx) / math.cos(sy) + math.cos(rot)
    matrix = [x / scale for x in (d, -b, 0.0, -c, a, 0.0)]
    matrix[2] += matrix[0] * (-cx - tx) + matrix[1] * (-cy - ty)
    matrix[5] += matrix[3] * (-cx - tx) + matrix[4] * (-cy - ty)
    matrix[2] += cx
    matrix[5] += cy
    return matrix


def _grid_mode(interpolation: Any) -> bool:
    """True for nearest, False for bilinear: the modes of the tensor (array) path."""
    mode = interpolation_mode(interpolation)
    if mode not in (InterpolationMode.NEAREST, InterpolationMode.BILINEAR):
        raise ValueError(f"Interpolation mode '{mode.value}' is unsupported with NumPy arrays")
    return mode == InterpolationMode.NEAREST


def _array_fill(fill: Any, channels: int) -> list[float] | None:
    if fill is None:
        return None
    if isinstance(fill, (int, float)):
        return [float(fill)] * channels
    values = [float(f) for f in fill]
    if len(values) not in (1, channels):
        raise ValueError(
            "The number of elements in 'fill' cannot broadcast to match the number of channels "
            f"of the image ({len(values)} != {channels})"
        )
    return values


def affine(
    img: Any,
    angle: float,
    translate: Sequence[int],
    scale: float,
    shear: Any,
    interpolation: Any = InterpolationMode.NEAREST,
    fill: Any = None,
    center: Sequence[int] | None = None,
) -> Any:
    """An affine transform keeping the image size: rotation by ``angle`` degrees about the
    centre (or ``center``), ``translate`` (dx, dy) pixels, ``scale``, ``shear`` degrees (one
    value or (x, y)). A PIL image goes through Pillow's transform as torchvision's does; an
    array is sampled as torchvision samples a tensor (nearest or bilinear)."""
    _check_image(img)
    if not isinstance(angle, (int, float)):
        raise TypeError("Argument angle should be int or float")
    if not isinstance(translate, (list, tuple)):
        raise TypeError("Argument translate should be a sequence")
    if len(translate) != 2:
        raise ValueError("Argument translate should be a sequence of length 2")
    if scale <= 0.0:
        raise ValueError("Argument scale should be positive")
    if isinstance(shear, numbers.Number):
        shear = [shear, 0.0]
    if not isinstance(shear, (list, tuple)):
        raise TypeError("Shear should be either a single value or a sequence of two values")
    shear = [shear[0], shear[0]] if len(shear) == 1 else list(shear)
    if len(shear) != 2:
        raise ValueError(f"Shear should be a sequence containing two values. Got {shear}")
    if center is not None and not isinstance(center, (list, tuple)):
        raise TypeError("Argument center should be a sequence")
    channels, height, width = get_dimensions(img)
    if _is_pil(img):
        pivot = [width * 0.5, height * 0.5] if center is None else center
        matrix = inverse_affine_matrix(pivot, float(angle), translate, scale, shear)
        return _pil.affine(img, matrix, pil_filter(interpolation), fill)
    offset = (
        [0.0, 0.0]
        if center is None
        else [c - s * 0.5 for c, s in zip(center, [width, height], strict=True)]
    )
    matrix = inverse_affine_matrix(offset, float(angle), [1.0 * t for t in translate], scale, shear)
    nearest = _grid_mode(interpolation)
    return _array.affine_grid_sample(img, matrix, nearest, _array_fill(fill, channels))


def rotate(
    img: Any,
    angle: float,
    interpolation: Any = InterpolationMode.NEAREST,
    expand: bool = False,
    center: Sequence[int] | None = None,
    fill: Any = None,
) -> Any:
    """Rotate by ``angle`` degrees counter-clockwise about the centre (or ``center``);
    ``expand`` enlarges the output to hold the whole rotated image."""
    _check_image(img)
    if not isinstance(angle, (int, float)):
        raise TypeError("Argument angle should be int or float")
    if center is not None and not isinstance(center, (list, tuple)):
        raise TypeError("Argument center should be a sequence")
    if _is_pil(img):
        return _pil.rotate(img, angle, pil_filter(interpolation), expand, center, fill)
    channels, height, width = get_dimensions(img)
    offset = (
        [0.0, 0.0]
        if center is None
        else [c - s * 0.5 for c, s in zip(center, [width, height], strict=True)]
    )
    matrix = inverse_affine_matrix(offset, -angle, [0.0, 0.0], 1.0, [0.0, 0.0])
    size = _expanded_size(matrix, width, height) if expand else (height, width)
    nearest = _grid_mode(interpolation)
    return _array.affine_grid_sample(img, matrix, nearest, _array_fill(fill, channels), size)


def _expanded_size(matrix: list[float], width: int, height: int) -> tuple[int, int]:
    """(height, width) holding the rotated corners, as torchvision computes it (float32,
    truncated to 1e-4 before rounding out)."""
    corners = np.array(
        [[-0.5 * width, -0.5 * height, 1.0], [-0.5 * width, 0.5 * height, 1.0],
         [0.5 * width, 0.5 * height, 1.0], [0.5 * width, -0.5 * height, 1.0]],
        dtype=np.float32,
    )  # fmt: skip
    moved = corners @ np.asarray(matrix, dtype=np.float32).reshape(2, 3).T
    shift = np.array([width * 0.5, height * 0.5], dtype=np.float32)
    tol = np.float32(1e-4)
    high = np.ceil(np.trunc((moved.max(axis=0) + shift) / tol) * tol)
    low = np.floor(np.trunc((moved.min(axis=0) + shift) / tol) * tol)
    size = high - low
    return int(size[1]), int(size[0])


_INT_MAX = {np.dtype(np.uint8): 255, np.dtype(np.int16): 32767, np.dtype(np.int32): 2**31 - 1}


def to_dtype(img: Any, dtype: Any, scale: bool = False) -> Any:
    """torchvision v2's ``to_dtype`` on an array image: the values converted to ``dtype``, and
    with ``scale`` mapped between the integer range and [0, 1] (PIL images pass through)."""
    if _is_pil(img):
        return img
    if not isinstance(img, np.ndarray):
        raise TypeError(f"img should be a NumPy array, got {type(img).__name__}")
    target = np.dtype(dtype)
    if not scale or img.dtype == target:
        return img.astype(target)
    source_float = np.issubdtype(img.dtype, np.floating)
    target_float = np.issubdtype(target, np.floating)
    if source_float and target_float:
        return img.astype(target)
    if source_float:
        if target not in _INT_MAX:
            raise TypeError(f"scaling {img.dtype} to {target} is not supported")
        return (img * (_INT_MAX[target] + 1.0 - 1e-3)).astype(target)
    if img.dtype not in _INT_MAX:
        raise TypeError(f"scaling {img.dtype} to {target} is not supported")
    if target_float:  # torchvision multiplies by the reciprocal of the integer range
        return img.astype(target) * target.type(1.0 / _INT_MAX[img.dtype])
    if target not in _INT_MAX:
        raise TypeError(f"scaling {img.dtype} to {target} is not supported")
    bits = {255: 8, 32767: 15, 2**31 - 1: 31}
    shift = bits[_INT_MAX[target]] - bits[_INT_MAX[img.dtype]]
    wide = img.astype(np.int64)
    return (wide << shift if shift > 0 else wide >> -shift).astype(target)
