"""Seed inputs for fuzz_kernel.c: small JPEGs of every layout the kernel takes, each behind a
request prefix that decodes it whole, crops it, and reduces it."""

import io
import pathlib
import sys

import numpy as np
from PIL import Image


def jpeg(width: int, height: int, seed: int, mode: str, **options) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).convert(mode).save(out, "JPEG", quality=85, **options)
    return out.getvalue()


def prefix(width: int, height: int, variant: int) -> bytes:
    def axis(size: int, out: int) -> bytes:
        return bytes([size - 1, 0, 0, out - 1, 0, out - 1, 0, 0])

    return bytes([variant % 4, variant * 5 % 64]) + axis(width, 32) + axis(height, 24)


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
            (root / f"seed_{k}_{variant}").write_bytes(prefix(width, height, variant) + data)


if __name__ == "__main__":
    main(sys.argv[1])
