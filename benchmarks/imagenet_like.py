"""A small ImageNet-like JPEG folder and the training pipeline written with PIL + NumPy.

Both loaders run this same dataset code, so a benchmark compares the loaders, not the
transforms. (flowloader.vision brings torchvision-compatible transforms separately.)
"""

from __future__ import annotations

import math
import os
import random

import numpy as np
from PIL import Image

from flowloader.vision.datasets.fake import natural_image

MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(3, 1, 1)


def make_jpeg_folder(root: str, count: int, size: tuple[int, int] = (500, 375)) -> list[str]:
    """``count`` JPEGs under ``root`` (made once; reused if present)."""
    os.makedirs(root, exist_ok=True)
    rng = np.random.default_rng(0)
    paths = []
    for i in range(count):
        path = os.path.join(root, f"img_{i:05d}.jpg")
        if not os.path.exists(path):
            natural_image(rng, *size).save(path, quality=90)
        paths.append(path)
    return paths


class JpegTrainDataset:
    """decode -> random resized crop 224 -> random flip -> float32 CHW, normalised."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int):
        with Image.open(self.paths[i]) as image:
            image = image.convert("RGB")
            box = random_crop_box(image.size)
            image = image.resize((224, 224), Image.BILINEAR, box=box)
        if random.random() < 0.5:
            image = image.transpose(Image.FLIP_LEFT_RIGHT)
        array = np.asarray(image, dtype=np.float32).transpose(2, 0, 1) / 255.0
        return (array - MEAN) / STD, i % 1000


def random_crop_box(size: tuple[int, int]) -> tuple[int, int, int, int]:
    width, height = size
    area = width * height
    for _ in range(10):
        target = area * random.uniform(0.08, 1.0)
        ratio = math.exp(random.uniform(math.log(3 / 4), math.log(4 / 3)))
        w = round(math.sqrt(target * ratio))
        h = round(math.sqrt(target / ratio))
        if 0 < w <= width and 0 < h <= height:
            left, top = random.randint(0, width - w), random.randint(0, height - h)
            return left, top, left + w, top + h
    side = min(width, height)
    return (width - side) // 2, (height - side) // 2, (width + side) // 2, (height + side) // 2
