"""Transforms on NumPy arrays laid out like torchvision tensors: (..., C, H, W)."""

from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image


def dimensions(array: np.ndarray) -> tuple[int, int, int]:
    if array.ndim < 2:
        raise TypeError(f"an image array needs at least 2 dimensions, got shape {array.shape}")
    channels = 1 if array.ndim == 2 else array.shape[-3]
    return channels, array.shape[-2], array.shape[-1]


def crop(array: np.ndarray, top: int, left: int, height: int, width: int) -> np.ndarray:
    """Crop, padding with zeros where the box leaves the image (as torchvision's crop)."""
    _, h, w = dimensions(array)
    if top >= 0 and left >= 0 and top + height <= h and left + width <= w:
        return array[..., top : top + height, left : left + width].copy()
    out = np.zeros((*array.shape[:-2], height, width), dtype=array.dtype)
    src_top, src_left = max(top, 0), max(left, 0)
    src_bottom, src_right = min(top + height, h), min(left + width, w)
    if src_bottom > src_top and src_right > src_left:
        out[..., src_top - top : src_bottom - top, src_left - left : src_right - left] = array[
            ..., src_top:src_bottom, src_left:src_right
        ]
    return out


def pad(array: np.ndarray, padding_ltrb: list[int], fill: Any, mode: str) -> np.ndarray:
    cut = [max(-p, 0) for p in padding_ltrb]
    if any(cut):
        h, w = array.shape[-2:]
        array = array[..., cut[1] : h - cut[3], cut[0] : w - cut[2]]
    left, top, right, bottom = (max(p, 0) for p in padding_ltrb)
    widths = [(0, 0)] * (array.ndim - 2) + [(top, bottom), (left, right)]
    if mode == "constant":
        return np.pad(array, widths, mode="constant", constant_values=0 if fill is None else fill)
    return np.pad(array, widths, mode=mode)  # type: ignore[call-overload]


def hflip(array: np.ndarray) -> np.ndarray:
    return array[..., ::-1].copy()


def vflip(array: np.ndarray) -> np.ndarray:
    return array[..., ::-1, :].copy()


def resize(array: np.ndarray, size_hw: tuple[int, int], resample: int) -> np.ndarray:
    """Resize every (H, W) plane with Pillow ("F" mode for floats, "L" for uint8); torch's
    antialiased interpolation follows Pillow's, so results agree within a small tolerance."""
    if resample == Image.Resampling.NEAREST:
        return _nearest(array, size_hw)
    planes = array.reshape(-1, *array.shape[-2:])
    out = np.empty((planes.shape[0], *size_hw), dtype=array.dtype)
    for i, plane in enumerate(planes):
        if array.dtype == np.uint8:
            image = Image.fromarray(plane, "L")
        else:
            image = Image.fromarray(plane.astype(np.float32, copy=False), "F")
        out[i] = np.asarray(image.resize((size_hw[1], size_hw[0]), resample))
    return out.reshape(*array.shape[:-2], *size_hw)


def _nearest(array: np.ndarray, size_hw: tuple[int, int]) -> np.ndarray:
    """torch's "nearest": source index floor(dst * in / out)."""
    h, w = array.shape[-2:]
    rows = np.minimum((np.arange(size_hw[0]) * (h / size_hw[0])).astype(np.int64), h - 1)
    cols = np.minimum((np.arange(size_hw[1]) * (w / size_hw[1])).astype(np.int64), w - 1)
    return array[..., rows[:, None], cols[None, :]]


def _bound(array: np.ndarray) -> float:
    return 1.0 if np.issubdtype(array.dtype, np.floating) else 255.0


def _blend(a: np.ndarray, b: Any, ratio: float) -> np.ndarray:
    bound = _bound(a)
    mixed = ratio * a.astype(np.float32) + (1.0 - ratio) * np.asarray(b, np.float32)
    mixed = np.clip(mixed, 0, bound)
    return mixed.astype(a.dtype) if a.dtype != np.uint8 else mixed.astype(np.uint8)


def rgb_to_grayscale(array: np.ndarray, num_output_channels: int = 1) -> np.ndarray:
    channels = dimensions(array)[0]
    if channels == 1:
        gray = array if array.ndim > 2 else array[None]
    else:
        r, g, b = (array[..., i, :, :].astype(np.float32) for i in range(3))
        gray = (0.2989 * r + 0.587 * g + 0.114 * b)[..., None, :, :]
        gray = (
            gray.astype(array.dtype) if array.dtype != np.uint8 else np.floor(gray).astype(np.uint8)
        )
    return np.repeat(gray, num_output_channels, axis=-3) if num_output_channels == 3 else gray


def adjust_brightness(array: np.ndarray, factor: float) -> np.ndarray:
    return _blend(array, 0.0, factor)


def adjust_contrast(array: np.ndarray, factor: float) -> np.ndarray:
    gray = rgb_to_grayscale(array).astype(np.float32) if dimensions(array)[0] == 3 else array
    mean = np.mean(gray, axis=(-3, -2, -1), keepdims=True)
    return _blend(array, mean, factor)


def adjust_saturation(array: np.ndarray, factor: float) -> np.ndarray:
    if dimensions(array)[0] == 1:
        return array
    return _blend(array, rgb_to_grayscale(array), factor)


def adjust_hue(array: np.ndarray, factor: float) -> np.ndarray:
    if dimensions(array)[0] == 1:
        return array
    dtype = array.dtype
    rgb = array.astype(np.float32) / (255.0 if dtype == np.uint8 else 1.0)
    hsv = _rgb_to_hsv(rgb)
    hsv[..., 0, :, :] = (hsv[..., 0, :, :] + factor) % 1.0
    out = _hsv_to_rgb(hsv)
    return (out * 255.0).round().astype(np.uint8) if dtype == np.uint8 else out.astype(dtype)


def _rgb_to_hsv(rgb: np.ndarray) -> np.ndarray:
    r, g, b = rgb[..., 0, :, :], rgb[..., 1, :, :], rgb[..., 2, :, :]
    maxc, minc = rgb.max(axis=-3), rgb.min(axis=-3)
    delta = maxc - minc
    safe = np.where(delta == 0, 1.0, delta)
    s = delta / np.where(maxc == 0, 1.0, maxc)
    rc, gc, bc = (maxc - r) / safe, (maxc - g) / safe, (maxc - b) / safe
    h = np.where(maxc == r, bc - gc, np.where(maxc == g, 2.0 + rc - bc, 4.0 + gc - rc))
    h = np.where(delta == 0, 0.0, (h / 6.0) % 1.0)
    return np.stack([h, s, maxc], axis=-3)


def _hsv_to_rgb(hsv: np.ndarray) -> np.ndarray:
    h, s, v = hsv[..., 0, :, :], hsv[..., 1, :, :], hsv[..., 2, :, :]
    i = np.floor(h * 6.0)
    f = h * 6.0 - i
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    i = i.astype(np.int64) % 6
    choices = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)]
    channels = [np.choose(i, [c[k] for c in choices]) for k in range(3)]
    return np.stack(channels, axis=-3)


def affine_grid_sample(
    array: np.ndarray,
    matrix: list[float],
    nearest: bool,
    fill: Any,
    out_size: tuple[int, int] | None = None,
) -> np.ndarray:
    """torchvision's affine transform of a tensor image, (..., C, H, W): output pixel (x, y),
    centred, maps through the inverse ``matrix`` to an input point sampled as grid_sample
    does (align_corners=False, zeros outside), in float32 for integer images; with ``fill``,
    a sampled mask of ones blends (bilinear) or replaces (nearest) the outside by it. Integer
    images are rounded back. ``out_size``: (height, width) of the output (rotate's expand)."""
    height, width = array.shape[-2:]
    out_h, out_w = out_size if out_size is not None else (height, width)
    dtype = array.dtype if np.issubdtype(array.dtype, np.floating) else np.dtype(np.float32)
    theta = np.asarray(matrix, dtype=dtype).reshape(2, 3)
    xs = np.linspace(-out_w * 0.5 + 0.5, out_w * 0.5 + 0.5 - 1, out_w, dtype=dtype)
    ys = np.linspace(-out_h * 0.5 + 0.5, out_h * 0.5 + 0.5 - 1, out_h, dtype=dtype)[:, None]
    half = np.asarray([0.5 * width, 0.5 * height], dtype=dtype)
    gx = (xs * theta[0, 0] + ys * theta[0, 1] + theta[0, 2]) / half[0]
    gy = (xs * theta[1, 0] + ys * theta[1, 1] + theta[1, 2]) / half[1]
    ix = ((gx + 1) * width - 1) / 2
    iy = ((gy + 1) * height - 1) / 2
    planes = array.astype(dtype, copy=False).reshape(-1, height, width)
    if nearest:
        cols, rows = np.rint(ix).astype(np.int64), np.rint(iy).astype(np.int64)
        inside = (cols >= 0) & (cols < width) & (rows >= 0) & (rows < height)
        out = np.where(inside, planes[:, rows.clip(0, height - 1), cols.clip(0, width - 1)], 0)
        mask = inside.astype(dtype)
    else:
        x0, y0 = np.floor(ix), np.floor(iy)
        out = np.zeros((len(planes), out_h, out_w), dtype)
        mask = np.zeros((out_h, out_w), dtype)
        for dy, dx in ((0, 0), (0, 1), (1, 0), (1, 1)):
            cols, rows = (x0 + dx).astype(np.int64), (y0 + dy).astype(np.int64)
            weight = (1 - np.abs(ix - (x0 + dx))) * (1 - np.abs(iy - (y0 + dy)))
            inside = (cols >= 0) & (cols < width) & (rows >= 0) & (rows < height)
            weight = np.where(inside, weight, 0).astype(dtype)
            out += planes[:, rows.clip(0, height - 1), cols.clip(0, width - 1)] * weight
            mask += weight
    if fill is not None:
        channels = array.shape[-3] if array.ndim > 2 else 1
        values = np.asarray(fill if isinstance(fill, (list, tuple)) else [fill], dtype)
        filled = np.broadcast_to(values.reshape(-1), (channels,)).reshape(-1, 1, 1)
        out = out.reshape(-1, channels, out_h, out_w)
        out = np.where(mask < 0.5, filled, out) if nearest else out * mask + (1.0 - mask) * filled
    out = out.reshape(*array.shape[:-2], out_h, out_w)
    if not np.issubdtype(array.dtype, np.floating):
        out = np.round(out)
    return out.astype(array.dtype)
