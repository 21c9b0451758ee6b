"""The batch plan's colour steps on a stack of 8-bit images (see :mod:`.stack_plan`):
``RandomGrayscale`` and ``ColorJitter``, each image with its own draws, bit for bit what
Pillow does to it on the per-sample path."""

from __future__ import annotations

from typing import Any

import numpy as np

from .stack_op import NotBatched, Op


class GrayscaleOp(Op):
    """``RandomGrayscale`` on 8-bit RGB (Pillow's ``convert("L")``: ITU-R 601-2 luma in
    16-bit fixed point, rounded) or single-channel images (unchanged): each image's draw
    ``random() < p``, the chosen ones made grey in every channel."""

    draws = True

    def __init__(self, step: Any, shape: tuple[int, int, int]) -> None:
        if shape[0] not in (1, 3):
            raise NotBatched(f"{shape[0]}-channel images (the per-sample path raises the error)")
        self.step, self.shape = step, shape

    def draw(self, source: Any) -> tuple[np.ndarray, ...]:
        return (source.random() < self.step.p,)

    def apply(self, stack: np.ndarray, params: tuple[np.ndarray, ...]) -> np.ndarray:
        chosen = np.flatnonzero(params[0])
        if not len(chosen) or self.shape[0] == 1:
            return stack
        stack[chosen] = _luma(stack[chosen])
        return stack


class ColorJitterOp(Op):
    """``ColorJitter`` on 8-bit grey or RGB images: each image's order and factors drawn as
    the step draws them (a permutation of four, then one uniform a set range), then, in each
    image's own order, Pillow's ``ImageEnhance`` blends, ``Image.blend(degenerate, image,
    factor)`` in float32 as Pillow's C does it (``degenerate + factor * (image -
    degenerate)``, clipped, truncated; the degenerate image black for brightness, the
    rounded mean grey for contrast, the grey image for saturation), and the hue shift of
    the per-sample path (Pillow's HSV conversions, the hue byte shifted)."""

    draws = True

    def __init__(self, step: Any, shape: tuple[int, int, int]) -> None:
        if shape[0] not in (1, 3):
            raise NotBatched(f"{shape[0]}-channel images (only grey and RGB are batched)")
        self.step, self.shape = step, shape
        self.ranges = (step.brightness, step.contrast, step.saturation, step.hue)

    def draw(self, source: Any) -> tuple[np.ndarray, ...]:
        order = source.permutation(4)
        factors = np.ones((4, len(order)))
        for which, bounds in enumerate(self.ranges):
            if bounds is not None:
                factors[which] = source.uniform(bounds[0], bounds[1])
        return order, factors

    def apply(self, stack: np.ndarray, params: tuple[np.ndarray, ...]) -> np.ndarray:
        order, factors = params
        stack = np.ascontiguousarray(stack)
        for position in range(4):
            for which in range(4):  # brightness, contrast, saturation, hue
                if self.ranges[which] is None:
                    continue
                chosen = np.flatnonzero(order[:, position] == which)
                if not len(chosen):
                    continue
                images = stack[chosen]
                if which == 3:
                    if self.shape[0] == 3:  # Pillow leaves a grey image's hue alone
                        stack[chosen] = _shifted_hue(images, factors[3, chosen])
                    continue
                alpha = factors[which, chosen].astype(np.float32)[:, None, None, None]
                stack[chosen] = _blend(self._degenerate(which, images), images, alpha)
        return stack

    def _degenerate(self, which: int, images: np.ndarray) -> np.ndarray:
        if which == 0:  # Brightness: black
            return np.zeros((len(images), 1, 1, 1), np.float32)
        gray = _luma(images)  # Pillow's convert("L")
        if which == 1:  # Contrast: the grey image's mean, rounded, everywhere
            total = gray.reshape(len(images), -1).sum(axis=1, dtype=np.int64)
            mean = np.floor(total / gray[0].size + 0.5)
            return mean.astype(np.float32)[:, None, None, None]
        return gray.astype(np.float32)  # Color: the image made grey


def _luma(images: np.ndarray) -> np.ndarray:
    """Pillow's ``convert("L")`` of (N, C, H, W) uint8 images: ITU-R 601-2 luma in 16-bit
    fixed point, rounded, as (N, 1, H, W) (grey images as they are)."""
    if images.shape[1] == 1:
        return images
    rgb = images.astype(np.uint32)
    luma = rgb[:, 0] * 19595 + rgb[:, 1] * 38470 + rgb[:, 2] * 7471 + 0x8000
    return (luma >> 16).astype(np.uint8)[:, None]


def _shifted_hue(images: np.ndarray, factors: np.ndarray) -> np.ndarray:
    """``F.adjust_hue`` of (N, 3, H, W) RGB images on their PIL path: Pillow's rgb2hsv, the
    hue byte plus ``int(factor * 255) % 256`` (wrapping), Pillow's hsv2rgb; the C's mixed
    float and double arithmetic kept step by step."""
    rgb = images.astype(np.int32)
    r, g, b = rgb[:, 0], rgb[:, 1], rgb[:, 2]
    maxc, minc = rgb.max(axis=1), rgb.min(axis=1)
    grey = maxc == minc
    cr = np.where(grey, 1, maxc - minc).astype(np.float32)
    s = cr / np.where(grey, 1, maxc).astype(np.float32)
    rc, gc, bc = ((maxc - c).astype(np.float32) / cr for c in (r, g, b))
    h = np.where(
        r == maxc,
        (bc - gc).astype(np.float64),
        np.where(g == maxc, 2.0 + rc.astype(np.float64) - bc, 4.0 + gc.astype(np.float64) - rc),
    ).astype(np.float32)
    h = np.fmod(h.astype(np.float64) / 6.0 + 1.0, 1.0).astype(np.float32)
    hue = np.where(grey, 0, np.clip((h.astype(np.float64) * 255.0).astype(np.int64), 0, 255))
    sat = np.where(grey, 0, np.clip((s.astype(np.float64) * 255.0).astype(np.int64), 0, 255))
    shifts = np.array([int(f * 255) % 256 for f in factors.tolist()], np.int64)
    hue = (hue + shifts[:, None, None]) % 256
    return _hsv_to_rgb(hue, sat, maxc)


def _round_half_away(values: np.ndarray) -> np.ndarray:
    """C's ``round`` of non-negative doubles: halves away from zero."""
    low = np.floor(values)
    return np.where(values - low >= 0.5, low + 1, low).astype(np.int64)


def _hsv_to_rgb(hue: np.ndarray, sat: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Pillow's hsv2rgb of (N, H, W) bytes, as (N, 3, H, W) uint8."""
    sixths = hue.astype(np.float64) * 6.0 / 255.0
    i = np.floor(sixths).astype(np.int64)
    f = (sixths - i).astype(np.float32)
    fs = (sat.astype(np.float64) / 255.0).astype(np.float32)
    v = value.astype(np.float64)
    p = _round_half_away(v * (1.0 - fs.astype(np.float64))).clip(0, 255)
    q = _round_half_away(v * (1.0 - (fs * f).astype(np.float64))).clip(0, 255)
    t = _round_half_away(v * (1.0 - fs * (1.0 - f.astype(np.float64)))).clip(0, 255)
    value = value.astype(np.int64)
    choices = [(value, t, p), (q, value, p), (p, value, t), (p, q, value), (t, p, value)]
    choices.append((value, p, q))
    sector = i % 6
    out = np.stack([np.choose(sector, [c[k] for c in choices]) for k in range(3)], axis=1)
    grey = (sat == 0)[:, None]
    return np.where(grey, value[:, None], out).astype(np.uint8)


def _blend(first: np.ndarray, second: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Pillow's ImagingBlend: ``first + alpha * (second - first)`` in float32, clipped to
    [0, 255] and truncated."""
    value = first + alpha * (second.astype(np.float32) - first)
    return np.clip(value, 0.0, 255.0).astype(np.uint8)
