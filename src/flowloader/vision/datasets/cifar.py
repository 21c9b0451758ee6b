"""CIFAR-10 and CIFAR-100 with torchvision's names, arguments and on-disk layout.

``root/cifar-10-batches-py/`` holds ``data_batch_1..5``, ``test_batch`` and ``batches.meta``;
``root/cifar-100-python/`` holds ``train``, ``test`` and ``meta``. The batch files are Python
pickles, read with :mod:`.safe_pickle` (never ``pickle.load``), and checked for shape and
labels. The batch path is :class:`ArrayImageDataset`'s (one gather, the transform over the
whole batch).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from . import safe_pickle
from .array_images import ArrayImageDataset
from .utils import download_and_extract_archive
from .vision import checked_targets

IMAGE_BYTES = 3 * 32 * 32


class CIFARFormatError(ValueError):
    """A CIFAR batch file is not shaped like one (wrong keys, sizes or labels)."""


class CIFAR10(ArrayImageDataset):
    """The CIFAR-10 images: 50,000 training and 10,000 test RGB images of 32x32, ten classes.

    ``data`` is a uint8 array (N, 32, 32, 3) and ``targets`` a list of ints, as in
    torchvision. A sample is a PIL RGB image and an int, before transforms. The archive's md5
    is checked on download; at construction the files are checked for shape, not hashed.
    """

    base_folder = "cifar-10-batches-py"
    url = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
    filename = "cifar-10-python.tar.gz"
    tgz_md5 = "c58f30108f718f92721af3b95e74349a"
    train_list: ClassVar[list[list[str]]] = [
        ["data_batch_1", "c99cafc152244af753f735de768cd75f"],
        ["data_batch_2", "d4bba439e000b95fd0a9bffe97cbabec"],
        ["data_batch_3", "54ebc095f3ab1f0389bbae665268c751"],
        ["data_batch_4", "634d18415352ddfa80567beed471001a"],
        ["data_batch_5", "482c414d41f54cd18b22e5b47cb7c3cb"],
    ]
    test_list: ClassVar[list[list[str]]] = [["test_batch", "40351d587109b95175f43aff81a1287e"]]
    meta: ClassVar[dict[str, str]] = {
        "filename": "batches.meta",
        "key": "label_names",
        "md5": "5ff9c542aee3614f3951f8cda6e48888",
    }
    label_key = "labels"
    num_classes = 10

    def _load(self) -> None:
        files = self.train_list if self.train else self.test_list
        parts = [self._read_batch(os.path.join(self._folder(), name)) for name, _ in files]
        planes = np.concatenate([pixels for pixels, _ in parts])
        # Stored as (N, 3, 32, 32) planes; kept as contiguous HWC pixels for PIL and gathers.
        self.data = np.ascontiguousarray(planes.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
        self._targets = np.concatenate([labels for _, labels in parts])
        self._load_meta()

    def _folder(self) -> str:
        return os.path.join(str(self.root), self.base_folder)

    def _check_exists(self) -> bool:
        names = [name for name, _ in self.train_list + self.test_list] + [self.meta["filename"]]
        return all(os.path.isfile(os.path.join(self._folder(), name)) for name in names)

    def _read_batch(self, path: str) -> tuple[np.ndarray, np.ndarray]:
        entry = safe_pickle.load(path)
        if not isinstance(entry, dict) or "data" not in entry or self.label_key not in entry:
            keys = sorted(map(str, entry)) if isinstance(entry, dict) else type(entry).__name__
            raise CIFARFormatError(
                f"{path}: expected a dict with 'data' and {self.label_key!r}, found {keys}"
            )
        pixels, labels = entry["data"], entry[self.label_key]
        if not (
            isinstance(pixels, np.ndarray)
            and pixels.dtype == np.uint8
            and pixels.ndim == 2
            and pixels.shape[1] == IMAGE_BYTES
        ):
            found = f"{pixels.dtype} {pixels.shape}" if isinstance(pixels, np.ndarray) else pixels
            raise CIFARFormatError(
                f"{path}: 'data' should be uint8 of shape (N, {IMAGE_BYTES}), found {found}"
            )
        labels = np.asarray(labels)
        if labels.shape != (len(pixels),) or labels.dtype.kind not in "iu":
            raise CIFARFormatError(
                f"{path}: {len(pixels)} images but {self.label_key!r} is {labels.dtype} "
                f"{labels.shape}"
            )
        if len(labels) and not (labels.min() >= 0 and labels.max() < self.num_classes):
            raise CIFARFormatError(
                f"{path}: labels should lie in [0, {self.num_classes}), found "
                f"[{labels.min()}, {labels.max()}]"
            )
        return pixels, labels.astype(np.int64)

    def _load_meta(self) -> None:
        path = os.path.join(self._folder(), self.meta["filename"])
        entry = safe_pickle.load(path)
        names = entry.get(self.meta["key"]) if isinstance(entry, dict) else None
        if not isinstance(names, list) or len(names) != self.num_classes:
            raise CIFARFormatError(
                f"{path}: expected {self.num_classes} class names under {self.meta['key']!r}"
            )
        self.classes = [str(name) for name in names]
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}

    @property
    def targets(self) -> list[int]:
        return self._targets.tolist()

    @targets.setter
    def targets(self, targets: Sequence[int]) -> None:
        self._targets = checked_targets(targets, self._targets)

    def label_array(self) -> np.ndarray:
        return self._targets

    def download(self) -> None:
        """Download the archive (md5-checked) and unpack it under ``root``, refusing members
        that would land outside it; does nothing if the files are already there."""
        if self._check_exists():
            return
        download_and_extract_archive(self.url, str(self.root), self.filename, self.tgz_md5)


class CIFAR100(CIFAR10):
    """CIFAR-100: the CIFAR-10 format with 100 fine classes (``targets``; the coarse
    superclasses are in the files too, as in torchvision, and not loaded)."""

    base_folder = "cifar-100-python"
    url = "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"
    filename = "cifar-100-python.tar.gz"
    tgz_md5 = "eb9058c3a382ffc7106e4002c42a8d85"
    train_list: ClassVar[list[list[str]]] = [["train", "16019d7e3df5f24257cddd939b257f8d"]]
    test_list: ClassVar[list[list[str]]] = [["test", "f0ef6b0ae62326f3e7ffdfab6717acfc"]]
    meta: ClassVar[dict[str, str]] = {
        "filename": "meta",
        "key": "fine_label_names",
        "md5": "7973b15100ade9c7d40fb424638fde48",
    }
    label_key = "fine_labels"
    num_classes = 100


__all__ = ["CIFAR10", "CIFAR100", "CIFARFormatError"]
