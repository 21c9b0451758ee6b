"""A dataset whose images all live in one uint8 array (MNIST, CIFAR), with a batch fast path.

``__getitem__`` is torchvision's: a PIL image from ``data[i]``, then the transforms.
``__getitems__`` gathers a whole batch with one NumPy indexing operation and, when the
transform's plan takes a stack of images (:mod:`flowloader.vision.stack_plan`: crops, pads,
flips, the conversions, Normalize), transforms the batch at once; the result is
bit-identical to the per-sample path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from flowloader import stats
from flowloader.batching import (
    Allocate,
    CollatedSamples,
    allocate_empty,
    load_one_by_one,
    overrides_getitem,
)

from ..plan import plan_for
from .vision import VisionDataset


class ArrayImageDataset(VisionDataset):
    """Images in ``data`` (N, H, W) or (N, H, W, C) uint8, labels from :meth:`label_array`.

    Takes torchvision's arguments for such a dataset; a subclass says where its files are
    (``_check_exists``, ``_folder``), how to fetch them (``download``) and read them
    (``_load``).
    """

    data: np.ndarray

    def __init__(
        self,
        root: str | Path,
        train: bool = True,
        transform: Callable | None = None,
        target_transform: Callable | None = None,
        download: bool = False,
    ) -> None:
        super().__init__(root, transform=transform, target_transform=target_transform)
        self.train = train
        if download:
            self.download()
        if not self._check_exists():
            raise RuntimeError(
                f"Dataset not found or corrupted in {self._folder()}. You can use download=True "
                "to download it"
            )
        self._load()

    def _folder(self) -> str:
        raise NotImplementedError

    def _check_exists(self) -> bool:
        raise NotImplementedError

    def download(self) -> None:
        raise NotImplementedError

    def _load(self) -> None:
        """Read the split's files into ``data`` and the labels."""
        raise NotImplementedError

    def label_array(self) -> np.ndarray:
        """The int64 labels, one per image (subclasses say where they keep them)."""
        raise NotImplementedError

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        image = Image.fromarray(self.data[index])
        target = int(self.label_array()[index])
        with stats.stage("transform"):
            if self.transform is not None:
                image = self.transform(image)
            if self.target_transform is not None:
                target = self.target_transform(target)
        return image, target

    def __getitems__(
        self,
        indices: list[int],
        rngs: Sequence[Any] | None = None,
        allocate: Allocate = allocate_empty,
    ) -> Any:
        """A batch: one gather, then the transform over the whole batch when its plan can
        (:mod:`flowloader.vision.stack_plan`: each image keeps its own random draws, and the
        batch is bit for bit the per-sample path's), into ``allocate``'s arrays; ``rngs[k]``
        is sample k's generator (see :mod:`flowloader.batching`)."""
        stack = None
        if not overrides_getitem(self, ArrayImageDataset) and self.target_transform is None:
            stack = plan_for(self.transform).stack_plan(self.data.shape[1:])
        if stack is None or self.data.dtype != np.uint8:
            return load_one_by_one(self, indices, rngs)
        positions = np.asarray(indices, dtype=np.int64)
        targets = self.label_array()[positions]  # NumPy's IndexError for a bad index
        with stats.stage("transform"):
            images = stack.run_rows(self.data, positions, allocate, rngs, indices)
        return CollatedSamples((images, targets), lambda i: (images[i], int(targets[i])))

    def __len__(self) -> int:
        return len(self.data)

    def extra_repr(self) -> str:
        return f"Split: {'Train' if self.train else 'Test'}"
