"""Pillow's affine transform (``Image.transform(size, AFFINE, matrix, resample, fillcolor)``)
of a stack of 8-bit images, each with its own matrix, bit for bit, for the batch plan's
RandomAffine and RandomRotation (:mod:`flowloader.vision.stack_plan`).

Pillow's NEAREST maps output pixel (x, y) through the inverse matrix ``a`` to an input pixel:

- when ``a[1] == a[3] == 0`` (scaling only): per axis, a position accumulated in double
  (``xo = a2 + a0 / 2``, then ``xo += a0`` pixel by pixel) truncated toward -1;
- otherwise, when the corners map within +-32768: 16.16 fixed point
  (``floor(v * 65536 + 0.5)``, int32), one integer step per pixel, the pixel at ``>> 16``.

Output pixels no input pixel reaches keep the fill colour. The same arithmetic on NumPy
arrays (``np.add.accumulate`` for the sequential sums) gives Pillow's bytes for the whole
stack at once, about twice as fast as Pillow image by image. An image whose matrix takes
Pillow's last, floating-point NEAREST path (corners beyond the fixed-point range), and every
BILINEAR image, is warped by Pillow itself: its bilinear filter redone in NumPy (float64, four
gathers a channel) ran two to three times slower than Pillow's own loop on 28x28 and 32x32
images.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

__all__ = [
    "affine_matrices",
    "nearest_resize",
    "pillow_rotation_matrix",
    "resize_stack",
    "warp_stack",
]

_FIXED_LIMIT = 32768.0


def pillow_rotation_matrix(
    angle: float, width: int, height: int, center: Sequence[float] | None
) -> list[float] | None:
    """The inverse matrix ``Image.rotate(angle, center=center)`` (no expand) hands to its
    transform, or None when Pillow takes a shortcut instead (a multiple of 90 degrees about
    the middle: a copy or a transpose)."""
    angle = angle % 360.0
    if not center:
        if angle in (0, 180) or (angle in (90, 270) and width == height):
            return None
        center = (width / 2, height / 2)
    radians = -math.radians(angle)
    matrix = [
        round(math.cos(radians), 15),
        round(math.sin(radians), 15),
        0.0,
        round(-math.sin(radians), 15),
        round(math.cos(radians), 15),
        0.0,
    ]
    a, b, c, d, e, f = matrix
    x, y = -center[0], -center[1]
    matrix[2], matrix[5] = a * x + b * y + c, d * x + e * y + f
    matrix[2] += center[0]
    matrix[5] += center[1]
    return matrix


def affine_matrices(
    angle: Any, translate: tuple[Any, Any], scale: Any, shear: tuple[Any, Any], center: Any
) -> np.ndarray:
    """torchvision's inverse affine matrix (``functional.inverse_affine_matrix``) for each
    image's parameters, (N, 6): the same float64 operations in the same order, the sines,
    cosines and tangents from :mod:`math` as there."""
    angle, scale = np.asarray(angle, np.float64), np.asarray(scale, np.float64)
    to_radians = math.pi / 180.0  # math.radians
    rot = angle * to_radians
    sx = np.asarray(shear[0], np.float64) * to_radians
    sy = np.asarray(shear[1], np.float64) * to_radians
    turned = (rot - sy).tolist()

    def each(function: Any, values: list[float]) -> np.ndarray:
        return np.array([function(v) for v in values], np.float64)

    cos_t, sin_t = each(math.cos, turned), each(math.sin, turned)
    cos_sy, tan_sx = each(math.cos, sy.tolist()), each(math.tan, sx.tolist())
    a = cos_t / cos_sy
    b = -cos_t * tan_sx / cos_sy - each(math.sin, rot.tolist())
    c = sin_t / cos_sy
    d = -sin_t * tan_sx / cos_sy + each(math.cos, rot.tolist())
    cx, cy = float(center[0]), float(center[1])
    tx, ty = np.asarray(translate[0]), np.asarray(translate[1])
    m0, m1, m3, m4 = d / scale, -b / scale, -c / scale, a / scale
    m2 = 0.0 + (m0 * (-cx - tx) + m1 * (-cy - ty))
    m5 = 0.0 + (m3 * (-cx - tx) + m4 * (-cy - ty))
    return np.stack([m0, m1, m2 + cx, m3, m4, m5 + cy], axis=1)


def _fixed(values: np.ndarray) -> np.ndarray:
    """Pillow's 16.16 fixed point: floor(v * 65536 + 0.5), an int32 as in C."""
    return np.floor(values * 65536.0 + 0.5).astype(np.int32)


def _fits_fixed(a: np.ndarray, width: int, height: int) -> np.ndarray:
    """Pillow's check_fixed at the four corners, for each matrix of ``a`` (N, 6)."""
    fits = np.ones(len(a), bool)
    for x, y in ((0, 0), (width, height), (0, height), (width, 0)):
        fits &= np.abs(x * a[:, 0] + y * a[:, 1] + a[:, 2]) < _FIXED_LIMIT
        fits &= np.abs(x * a[:, 3] + y * a[:, 4] + a[:, 5]) < _FIXED_LIMIT
    return fits


def _coord(values: np.ndarray) -> np.ndarray:
    """Pillow's COORD: -1 below zero, else truncated."""
    return np.where(values < 0.0, -1, np.minimum(values, 2**31 - 1).astype(np.int32))


def _nearest_sources(a: np.ndarray, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """Each image's output pixels as flat indices (y * W + x) of the input pixels Pillow's
    NEAREST paths read, ``H * W`` where none is (the fill), (N, H * W); and which images take
    neither path (to be warped by Pillow)."""
    count, size = len(a), height * width
    flat = np.full((count, size), size, np.int32)
    scaling = (a[:, 1] == 0) & (a[:, 3] == 0)
    fixed = ~scaling & _fits_fixed(a, width, height)
    xs = np.arange(width, dtype=np.int32)[None, None, :]
    ys = np.arange(height, dtype=np.int32)[None, :, None]
    if fixed.any():  # affine_fixed: 16.16 integer steps from each row's start (int32, as C)
        f = a[fixed]
        a0, a1, a3, a4 = (_fixed(f[:, i])[:, None, None] for i in (0, 1, 3, 4))
        a2 = _fixed(f[:, 2] + f[:, 0] * 0.5 + f[:, 1] * 0.5)[:, None, None]
        a5 = _fixed(f[:, 5] + f[:, 3] * 0.5 + f[:, 4] * 0.5)[:, None, None]
        cols = np.add(a2 + ys * a1, xs * a0)
        cols >>= 16
        rows = np.add(a5 + ys * a4, xs * a3)
        rows >>= 16
        flat[fixed] = _flat(rows, cols, width, height)
    if scaling.any():  # ImagingScaleAffine: positions summed in double, pixel by pixel
        s = a[scaling]
        across = np.repeat(s[:, 0:1], width, axis=1)
        across[:, 0] = s[:, 2] + s[:, 0] * 0.5
        down = np.repeat(s[:, 4:5], height, axis=1)
        down[:, 0] = s[:, 5] + s[:, 4] * 0.5
        cols = _coord(np.add.accumulate(across, axis=1))[:, None, :]
        rows = _coord(np.add.accumulate(down, axis=1))[:, :, None]
        flat[scaling] = _flat(rows + 0 * xs, cols + 0 * ys, width, height)
    return flat, ~(scaling | fixed)


def _flat(rows: np.ndarray, cols: np.ndarray, width: int, height: int) -> np.ndarray:
    """(N, H, W) int32 input rows and columns as flat indices, ``H * W`` outside the image
    (a negative int32 read as uint32 is beyond any size)."""
    inside = cols.view(np.uint32) < width
    inside &= rows.view(np.uint32) < height
    rows *= width
    rows += cols
    return np.where(inside, rows, height * width).reshape(len(rows), -1)


def warp_stack(
    stack: np.ndarray,
    matrices: np.ndarray,
    bilinear: bool,
    fill: Sequence[int],
    by_pillow: Any,
) -> np.ndarray:
    """Each image of an (N, C, H, W) uint8 stack through Pillow's affine transform with its
    inverse matrix ``matrices[k]`` (N, 6), the size kept, outside ``fill`` (one value per
    channel). ``by_pillow(k)``: image k done by Pillow itself (a path not written here)."""
    count, channels, height, width = stack.shape
    out = np.empty((count, channels, height, width), np.uint8)
    if bilinear:  # Pillow's own, image by image: faster than its arithmetic in NumPy
        for k in range(count):
            out[k] = by_pillow(k)
        return out
    flat, other = _nearest_sources(matrices, width, height)
    # Indices into the whole stack's plane, the fill after it (image k's pixels from k * H * W).
    size = height * width
    index = np.where(flat < size, flat + (np.arange(count) * size)[:, None], count * size)
    for channel in range(channels):
        plane = np.append(stack[:, channel].reshape(-1), np.uint8(fill[channel]))
        out[:, channel] = np.take(plane, index).reshape(count, height, width)
    for position in np.flatnonzero(other).tolist():
        out[position] = by_pillow(position)
    return out


def pillow_image(chw: np.ndarray) -> Image.Image:
    """An 8-bit (C, H, W) array as the PIL image the per-sample path holds ("L" or "RGB")."""
    return Image.fromarray(
        chw[0] if len(chw) == 1 else np.ascontiguousarray(chw.transpose(1, 2, 0))
    )


# Pillow's resampling filters (Resample.c) that the batch plan takes, with their support.
def _bilinear_weight(x: float) -> float:
    x = -x if x < 0.0 else x
    return 1.0 - x if x < 1.0 else 0.0


def _bicubic_weight(x: float) -> float:
    a = -0.5
    x = -x if x < 0.0 else x
    if x < 1.0:
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    if x < 2.0:
        return (((x - 5) * x + 8) * x - 4) * a
    return 0.0


def _box_weight(x: float) -> float:
    return 1.0 if -0.5 < x <= 0.5 else 0.0


RESAMPLE_FILTERS = {
    int(Image.Resampling.BILINEAR): (_bilinear_weight, 1.0),
    int(Image.Resampling.BICUBIC): (_bicubic_weight, 2.0),
    int(Image.Resampling.BOX): (_box_weight, 0.5),
}
_PRECISION_BITS = 32 - 8 - 2


def resample_matrix(in_size: int, out_size: int, resample: int) -> np.ndarray:
    """Pillow's 8-bit resampling coefficients along one axis (``precompute_coeffs`` in
    double, then ``normalize_coeffs_8bpc``'s 22-bit fixed point) as an (in, out) int64
    matrix: output ``o`` is the sum of input ``i`` times ``matrix[i, o]``."""
    weight, support = RESAMPLE_FILTERS[resample]
    scale = float(in_size) / out_size
    filterscale = max(scale, 1.0)
    support = support * filterscale
    matrix = np.zeros((in_size, out_size), np.int64)
    for xx in range(out_size):
        center = 0.0 + (xx + 0.5) * scale
        ss = 1.0 / filterscale
        xmin = max(int(center - support + 0.5), 0)
        xmax = min(int(center + support + 0.5), in_size) - xmin
        k = [weight((x + xmin - center + 0.5) * ss) for x in range(xmax)]
        total = 0.0
        for w in k:
            total += w
        if total != 0.0:
            k = [w / total for w in k]
        for x, w in enumerate(k):
            fixed = w * (1 << _PRECISION_BITS)
            matrix[x + xmin, xx] = int(-0.5 + fixed) if w < 0 else int(0.5 + fixed)
    return matrix


def _pass(pixels: np.ndarray, matrix: np.ndarray, axis: int) -> np.ndarray:
    """One 8-bit pass along ``axis`` (-1: columns, -2: rows): integer sums from half a unit,
    shifted back and clipped as Pillow's clip8."""
    if axis == -1:
        sums = pixels.astype(np.int64) @ matrix
    else:
        sums = np.swapaxes(np.swapaxes(pixels.astype(np.int64), -1, -2) @ matrix, -1, -2)
    sums += 1 << (_PRECISION_BITS - 1)
    sums >>= _PRECISION_BITS
    return np.clip(sums, 0, 255).astype(np.uint8)


def resize_stack(
    stack: np.ndarray, size: tuple[int, int], resample: int, vertical_first_rule: bool
) -> np.ndarray:
    """Pillow's ``Image.resize((w, h), resample)`` of every image of an (N, C, H, W) uint8
    stack (BILINEAR, BICUBIC, BOX): a horizontal then a vertical pass through an 8-bit
    image, or the other way round where Pillow 13 does it (``vertical_first_rule``: the
    height shrinking by more than twice as many pixels as the width)."""
    in_h, in_w = stack.shape[-2:]
    out_h, out_w = size
    across = resample_matrix(in_w, out_w, resample) if out_w != in_w else None
    down = resample_matrix(in_h, out_h, resample) if out_h != in_h else None
    shrinks = out_h < in_h and in_h - out_h > 2 * (in_w - out_w)
    if across is not None and down is not None and vertical_first_rule and shrinks:
        return _pass(_pass(stack, down, -2), across, -1)
    if across is not None:
        stack = _pass(stack, across, -1)
    return stack if down is None else _pass(stack, down, -2)


def nearest_resize(stack: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Pillow's NEAREST ``Image.resize`` of an (N, C, H, W) stack: its scaling transform with
    steps ``in / out`` (ImagingScaleAffine: positions summed in double from half a step)."""
    in_h, in_w = stack.shape[-2:]
    out_h, out_w = size
    across = np.full(out_w, float(in_w) / out_w)
    across[0] = 0.0 + across[0] * 0.5
    down = np.full(out_h, float(in_h) / out_h)
    down[0] = 0.0 + down[0] * 0.5
    cols = _coord(np.add.accumulate(across)).clip(0, in_w - 1)
    rows = _coord(np.add.accumulate(down)).clip(0, in_h - 1)
    return stack[:, :, rows[:, None], cols[None, :]]
