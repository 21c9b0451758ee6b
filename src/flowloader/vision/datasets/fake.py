"""FakeData, and writers of small real-format sample data (MNIST IDX files, CIFAR batch
pickles, an ImageFolder of JPEGs) for tests, examples and the CLI, since nothing can be
downloaded at run time here."""

from __future__ import annotations

import functools
import gzip
import os
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from .idx import encode_idx
from .vision import VisionDataset


class FakeData(VisionDataset):
    """Random RGB PIL images and labels; sample ``i`` is the same every time."""

    def __init__(
        self,
        size: int = 1000,
        image_size: tuple[int, int, int] = (3, 224, 224),
        num_classes: int = 10,
        transform: Callable | None = None,
        target_transform: Callable | None = None,
        random_offset: int = 0,
    ) -> None:
        super().__init__(None, transform=transform, target_transform=target_transform)
        self.size, self.image_size = size, image_size
        self.num_classes, self.random_offset = num_classes, random_offset

    def __getitem__(self, index: int) -> tuple[Any, int]:
        if not 0 <= index < len(self):
            raise IndexError(f"{type(self).__name__} index out of range: {index}")
        rng = np.random.default_rng(index + self.random_offset)
        channels, height, width = self.image_size
        pixels = rng.integers(0, 256, (height, width, channels), dtype=np.uint8)
        image = Image.fromarray(pixels[:, :, 0] if channels == 1 else pixels)
        target = int(rng.integers(0, self.num_classes))
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    def __len__(self) -> int:
        return self.size


def natural_image(rng: np.random.Generator, width: int, height: int) -> Image.Image:
    """Smooth colour fields plus fine grain: compresses and decodes like a photograph."""
    coarse = rng.random((height // 16 + 1, width // 16 + 1, 3)) * 255
    image = Image.fromarray(coarse.astype(np.uint8)).resize(
        (width, height), Image.Resampling.BICUBIC
    )
    pixels = np.asarray(image, dtype=np.int16) + rng.integers(-12, 12, (height, width, 3))
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


@functools.cache
def _digit_font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """Pillow's default font at ``size``, loaded once (loading it took 2/3 of a digit)."""
    return ImageFont.load_default(size)


def digit_image(rng: np.random.Generator, label: int) -> np.ndarray:
    """A 28x28 uint8 drawing of ``label``: bold, roughly centred, with random size, offset
    and a little noise (MNIST-like enough to learn from)."""
    image = Image.new("L", (28, 28), 0)
    draw = ImageDraw.Draw(image)
    size = int(rng.integers(17, 23))
    dx, dy = (int(v) for v in rng.integers(-2, 3, size=2))
    draw.text(
        (14 + dx, 14 + dy),
        str(label),
        fill=255,
        font=_digit_font(size),
        anchor="mm",
        stroke_width=1,
        stroke_fill=255,
    )
    pixels = np.asarray(image, dtype=np.int16) + rng.integers(0, 30, (28, 28))
    return np.clip(pixels, 0, 255).astype(np.uint8)


def make_mnist(
    root: str,
    train_size: int = 6000,
    test_size: int = 1000,
    folder: str = "MNIST",
    compress: bool = False,
    seed: int = 0,
) -> str:
    """Write MNIST-format IDX files to ``root/<folder>/raw``; returns that directory."""
    raw = os.path.join(root, folder, "raw")
    os.makedirs(raw, exist_ok=True)
    rng = np.random.default_rng(seed)
    for split, count in (("train", train_size), ("t10k", test_size)):
        labels = rng.integers(0, 10, count).astype(np.uint8)
        images = (
            np.stack([digit_image(rng, int(label)) for label in labels])
            if count
            else (np.zeros((0, 28, 28), np.uint8))
        )
        for kind, suffix, array in (("images", "idx3", images), ("labels", "idx1", labels)):
            path = os.path.join(raw, f"{split}-{kind}-{suffix}-ubyte")
            data = encode_idx(array)
            if compress:
                with gzip.open(path + ".gz", "wb") as out:
                    out.write(data)
            else:
                with open(path, "wb") as out:
                    out.write(data)
    return raw


def make_image_folder(
    root: str,
    num_classes: int = 10,
    images_per_class: int = 20,
    size: tuple[int, int] = (500, 375),
    quality: int = 90,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> str:
    """Write an ImageFolder of JPEGs with natural-image statistics; returns ``root``.

    Files already present are kept, so an interrupted run can be resumed.
    """
    rng = np.random.default_rng(seed)
    total = num_classes * images_per_class
    written = 0
    for c in range(num_classes):
        class_dir = os.path.join(root, f"class_{c:03d}")
        os.makedirs(class_dir, exist_ok=True)
        for i in range(images_per_class):
            path = os.path.join(class_dir, f"img_{i:05d}.jpg")
            image = natural_image(rng, *size)  # drawn even when kept, so content is stable
            if not os.path.exists(path):
                image.save(path + ".part", format="JPEG", quality=quality)
                os.replace(path + ".part", path)
            written += 1
            if progress is not None:
                progress(written, total)
    return root


CIFAR10_CLASSES = (
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
)  # fmt: skip


def cifar_images(rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    """(N, 32, 32, 3) uint8 images: noise plus a patch whose colour and place follow the label
    (something a small network can learn)."""
    images = rng.integers(0, 96, (len(labels), 32, 32, 3), dtype=np.uint8)
    palette = np.random.default_rng(1234).integers(96, 256, (100, 3), dtype=np.uint8)
    for label in np.unique(labels):
        row, column = (label % 4) * 5, (label // 4 % 4) * 5
        images[labels == label, row : row + 16, column : column + 16] = palette[label]
    return images


def make_cifar(
    root: str, cifar100: bool = False, train_size: int = 5000, test_size: int = 1000, seed: int = 0
) -> str:
    """Write CIFAR-10 (or CIFAR-100) batch files in the real format, pickles of dicts with
    (N, 3072) uint8 planes, under ``root/cifar-10-batches-py`` (``root/cifar-100-python``);
    returns that folder. CIFAR-10's training images are spread over its five batch files."""
    folder = os.path.join(root, "cifar-100-python" if cifar100 else "cifar-10-batches-py")
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    classes = 100 if cifar100 else 10
    if cifar100:
        splits = [("train", train_size), ("test", test_size)]
    else:
        bounds = np.linspace(0, train_size, 6).astype(int)
        splits = [(f"data_batch_{i + 1}", int(bounds[i + 1] - bounds[i])) for i in range(5)]
        splits.append(("test_batch", test_size))
    for name, count in splits:
        labels = rng.integers(0, classes, count)
        planes = cifar_images(rng, labels).transpose(0, 3, 1, 2).reshape(count, 3 * 32 * 32)
        entry: dict[str, Any] = {
            "batch_label": f"{name} (flowloader sample data)",
            "data": np.ascontiguousarray(planes),
            "filenames": [f"{name}_{i:05d}.png" for i in range(count)],
        }
        if cifar100:
            entry["fine_labels"] = labels.tolist()
            entry["coarse_labels"] = (labels // 5).tolist()
        else:
            entry["labels"] = labels.tolist()
        _write_pickle(os.path.join(folder, name), entry)
    if cifar100:
        meta: dict[str, Any] = {
            "fine_label_names": [f"fine_{i:03d}" for i in range(100)],
            "coarse_label_names": [f"coarse_{i:02d}" for i in range(20)],
        }
        _write_pickle(os.path.join(folder, "meta"), meta)
    else:
        meta = {"label_names": list(CIFAR10_CLASSES), "num_cases_per_batch": 10000,
                "num_vis": 3072}  # fmt: skip
        _write_pickle(os.path.join(folder, "batches.meta"), meta)
    return folder


def _write_pickle(path: str, entry: dict[str, Any]) -> None:
    with open(path + ".part", "wb") as out:
        pickle.dump(entry, out, protocol=2)  # the protocol of the real (Python 2) files
    os.replace(path + ".part", path)
