"""The built-in sample datasets that ``flowloader bench`` uses, made once and cached."""

from __future__ import annotations

import os
import shutil

from flowloader.vision import datasets

from .progress import Progress

IMAGENET_LIKE_CLASSES, IMAGENET_LIKE_PER_CLASS, IMAGENET_LIKE_SIZE = 20, 100, (500, 375)
MNIST_SIZES = {"train_size": 60000, "test_size": 10000}
KINDS = {  # kind -> what it is, as make-dataset reports it
    "imagenet-like": "an ImageNet-like ImageFolder of JPEGs",
    "mnist": "an MNIST-format dataset",
}


def cache_dir() -> str:
    """$FLOWLOADER_CACHE, else $XDG_CACHE_HOME/flowloader, else ~/.cache/flowloader."""
    explicit = os.environ.get("FLOWLOADER_CACHE")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "flowloader")


def make(kind: str, directory: str, images: int | None = None) -> str:
    """Write a sample dataset of ``kind`` into ``directory`` with a progress bar."""
    if kind == "imagenet-like":
        per_class = (
            IMAGENET_LIKE_PER_CLASS if images is None else max(1, images // IMAGENET_LIKE_CLASSES)
        )
        progress = Progress(
            f"writing JPEGs to {directory}", IMAGENET_LIKE_CLASSES * per_class, "images"
        )
        datasets.make_image_folder(
            directory,
            num_classes=IMAGENET_LIKE_CLASSES,
            images_per_class=per_class,
            size=IMAGENET_LIKE_SIZE,
            progress=lambda done, total: progress.update(done),
        )
        progress.close()
        return directory
    if kind == "mnist":
        train = MNIST_SIZES["train_size"] if images is None else images
        progress = Progress(f"writing MNIST-format files to {directory}", None, "digits")
        progress.update(train)
        datasets.make_mnist(directory, train_size=train, test_size=MNIST_SIZES["test_size"] // 6)
        progress.close()
        return directory
    raise ValueError(f"unknown sample dataset {kind!r}; choose from {', '.join(KINDS)}")


def builtin(kind: str) -> str:
    """The cached sample dataset of ``kind``, made on first use (atomically)."""
    final = os.path.join(cache_dir(), kind)
    marker = os.path.join(final, ".complete")
    if os.path.exists(marker):
        return final
    staging = final + ".partial"
    make(kind, staging)
    open(os.path.join(staging, ".complete"), "w").close()
    shutil.rmtree(final, ignore_errors=True)
    os.replace(staging, final)
    return final
