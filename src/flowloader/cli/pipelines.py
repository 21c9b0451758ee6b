"""The seed's pipelines, built with flowloader's or torchvision's transforms."""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
PIPELINES = ("imagenet-train", "imagenet-val", "mnist")


def transform(pipeline: str, T: ModuleType, uint8: bool = False) -> Any:
    """The transform of ``pipeline`` from a transforms module (ours or torchvision's).

    ``uint8``: end in PILToTensor (uint8 CHW), leaving normalisation to the consumer.
    """
    if pipeline == "imagenet-train":
        steps = [T.RandomResizedCrop(224), T.RandomHorizontalFlip()]
    elif pipeline == "imagenet-val":
        steps = [T.Resize(256), T.CenterCrop(224)]
    else:
        return T.Compose([T.ToTensor(), T.Normalize((0.1307,), (0.3081,))])
    if uint8:
        return T.Compose([*steps, T.PILToTensor()])
    return T.Compose([*steps, T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def kind_of(root: str) -> str:
    """ "mnist" for an MNIST root (``root/MNIST/raw``), else "imagenet" (an ImageFolder)."""
    if any(os.path.isdir(os.path.join(root, name, "raw")) for name in ("MNIST", "FashionMNIST")):
        return "mnist"
    return "imagenet"


def dataset(
    pipeline: str, root: str, datasets: ModuleType, T: ModuleType, uint8: bool = False
) -> Any:
    """The dataset for ``pipeline`` under ``root`` (from our or torchvision's datasets)."""
    if pipeline == "mnist":
        name = "MNIST" if os.path.isdir(os.path.join(root, "MNIST", "raw")) else "FashionMNIST"
        return getattr(datasets, name)(root, train=True, transform=transform(pipeline, T))
    return datasets.ImageFolder(root, transform=transform(pipeline, T, uint8))
