"""Seed inputs for fuzz_kernel.c: small JPEGs of every layout the kernel takes, each behind a
request prefix that decodes it whole, crops it, and reduces it; and long thin JPEGs (3000x2,
2x3000, 4000x1 and 1x4000) in the harness's extreme mode, behind prefixes that shrink an axis of
thousands of pixels to 1 and upscale one of a few pixels to 4000. The harness picks the mode
by a hash of the whole input (is_extreme): a seed gets the mode meant for it from a few zero
bytes after the JPEG's end, where they change nothing else."""

import io
import pathlib
import struct
import sys

import numpy as np
from PIL import Image

EXTREME_ONE_IN = 16  # as in fuzz_kernel.c
MASK = (1 << 64) - 1


def is_extreme(data: bytes) -> bool:
    """fuzz_kernel.c's is_extreme: the same 64-bit hash of all the bytes."""
    k = 0x9E3779B97F4A7C15
    h = k ^ len(data)
    whole = len(data) // 8 * 8
    words = struct.unpack(f"<{whole // 8}Q", data[:whole])
    for w in [*words, *data[whole:]]:
        h = ((((h << 23) | (h >> 41)) & MASK) ^ w) * k & MASK
    h ^= h >> 29
    h = h * 0xBF58476D1CE4E5B9 & MASK
    h ^= h >> 32
    return h % EXTREME_ONE_IN == 0


def in_mode(data: bytes, extreme: bool) -> bytes:
    """`data`, with the fewest zero bytes after it that give it the mode asked for."""
    padded = data
    while is_extreme(padded) != extreme:
        padded += b"\0"
    return padded


def jpeg(width: int, height: int, seed: int, mode: str, **options) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).convert(mode).save(out, "JPEG", quality=85, **options)
    return out.getvalue()


def smooth_jpeg(width: int, height: int, seed: int, mode: str, **options) -> bytes:
    """Slow ramps with a little noise: a few KB even at 4000 pixels."""
    ys, xs = np.mgrid[0:height, 0:width]
    ramps = [xs * 250 // max(width - 1, 31), ys * 250 // max(height - 1, 31), (xs + ys) // 16 % 250]
    noise = np.random.default_rng(seed).integers(0, 2, (height, width, 3))
    pixels = (np.stack(ramps, -1) + noise).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).convert(mode).save(out, "JPEG", quality=85, **options)
    return out.getvalue()


def prefix(width: int, height: int, variant: int) -> bytes:
    def axis(size: int, out: int) -> bytes:
        return bytes([size - 1, 0, 0, out - 1, 0, out - 1, 0, 0])

    return bytes([variant % 4, variant * 5 % 64]) + axis(width, 32) + axis(height, 24)


def extreme_prefix(first: int, flags: int, x: tuple, y: tuple) -> bytes:
    """A prefix in the extreme mode's reading (the first two bytes as in the normal mode's).
    Each axis is (pixels, out): pixels 0 takes the whole decoded axis, 1 to 4 that many of its
    first pixels; out is the output size, all of it kept (as far as the work budget allows)."""

    def axis(pixels: int, out: int) -> bytes:
        taken = bytes([0, 0]) if pixels == 0 else bytes([pixels - 1, 2 << 6])
        return taken + bytes([0, (out - 1) & 0xFF, (out - 1) >> 8, 0, 0, 0])

    return bytes([first, flags]) + axis(*x) + axis(*y)


def main(directory: str) -> None:
    root = pathlib.Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    layouts = [
        {"mode": "RGB", "subsampling": 2}, {"mode": "RGB", "subsampling": 1},
        {"mode": "RGB", "subsampling": 0}, {"mode": "RGB", "progressive": True},
        {"mode": "RGB", "restart_marker_blocks": 1}, {"mode": "L"}, {"mode": "CMYK"},
    ]  # fmt: skip
    for k, options in enumerate(layouts):
        width, height = 40 + 8 * k, 30 + 5 * k
        data = jpeg(width, height, k, **options)
        for variant in range(3):
            seed = in_mode(prefix(width, height, variant) + data, extreme=False)
            (root / f"seed_{k}_{variant}").write_bytes(seed)
    thin = [
        (3000, 2, {"mode": "RGB", "subsampling": 2}),
        (2, 3000, {"mode": "L", "restart_marker_blocks": 8}),
        (4000, 1, {"mode": "RGB", "subsampling": 0}),
        (1, 4000, {"mode": "RGB", "subsampling": 1}),
    ]
    for k, (width, height, options) in enumerate(thin):
        data = smooth_jpeg(width, height, 100 + k, **options)
        # the long axis to 1 and the short one to 4000 (bilinear, uint8, AVX2 passes); the
        # long one to 4000 and the short one to 1 (bicubic, both flips, float, at 1/2 scale);
        # 1 pixel of each to 4000 (bicubic, normalized, portable passes, Pillow 13's order,
        # at 1/8 scale)
        shrink_long = ((0, 1), (0, 4000)) if width > height else ((0, 4000), (0, 1))
        variants = [
            extreme_prefix(0, 0x00, *shrink_long),
            extreme_prefix(1, 0x0F, *shrink_long[::-1]),
            extreme_prefix(3 | 4, 0x29, (1, 4000), (1, 4000)),
        ]
        for variant, head in enumerate(variants):
            seed = in_mode(head + data, extreme=True)
            (root / f"seed_thin_{k}_{variant}").write_bytes(seed)


if __name__ == "__main__":
    main(sys.argv[1])
