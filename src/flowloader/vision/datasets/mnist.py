"""MNIST and FashionMNIST with torchvision's layout and API, plus a batch fast path.

Files live in ``root/<ClassName>/raw/`` as ``train-images-idx3-ubyte`` etc., unpacked or as
``.gz``. The batch path is :class:`ArrayImageDataset`'s (one gather, the transform over the
whole batch).
"""

from __future__ import annotations

import os
import sys
from typing import ClassVar

import numpy as np

from .array_images import ArrayImageDataset
from .idx import IDXError, read_image_file, read_label_file
from .utils import URLError, check_integrity, download_and_extract_archive


class MNIST(ArrayImageDataset):
    """The MNIST digits: 60,000 training and 10,000 test images of 28x28, labels 0-9.

    ``data`` is a uint8 array (N, 28, 28) and ``targets`` an int64 array (N,). A sample is a
    PIL image of mode 'L' and an int, before transforms.
    """

    mirrors: ClassVar[list[str]] = [
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        "http://yann.lecun.com/exdb/mnist/",
    ]
    resources: ClassVar[list[tuple[str, str]]] = [
        ("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
        ("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"),
        ("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"),
        ("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"),
    ]
    classes: ClassVar[list[str]] = [
        "0 - zero",
        "1 - one",
        "2 - two",
        "3 - three",
        "4 - four",
        "5 - five",
        "6 - six",
        "7 - seven",
        "8 - eight",
        "9 - nine",
    ]

    def _load(self) -> None:
        self.data, self.targets = self._load_data()

    @property
    def raw_folder(self) -> str:
        return os.path.join(str(self.root), type(self).__name__, "raw")

    @property
    def class_to_idx(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.classes)}

    def _file(self, kind: str) -> str:
        """The path of the images or labels file, unpacked if present, else the ``.gz``."""
        split = "train" if self.train else "t10k"
        suffix = "idx3" if kind == "images" else "idx1"
        path = os.path.join(self.raw_folder, f"{split}-{kind}-{suffix}-ubyte")
        return path if os.path.isfile(path) or not os.path.isfile(path + ".gz") else path + ".gz"

    def _folder(self) -> str:
        return self.raw_folder

    def _check_exists(self) -> bool:
        return all(os.path.isfile(self._file(kind)) for kind in ("images", "labels"))

    def _load_data(self) -> tuple[np.ndarray, np.ndarray]:
        images = read_image_file(self._file("images"))
        labels = read_label_file(self._file("labels"))
        if len(images) != len(labels):
            raise IDXError(
                f"{self.raw_folder}: {len(images)} images but {len(labels)} labels for the "
                f"{'train' if self.train else 'test'} split"
            )
        return images, labels

    def download(self) -> None:
        """Download and unpack the four files into ``raw_folder`` (md5-checked), trying each
        mirror in turn; does nothing if they are already there."""
        if self._check_exists():
            return
        os.makedirs(self.raw_folder, exist_ok=True)
        for filename, md5 in self.resources:
            if check_integrity(os.path.join(self.raw_folder, filename[: -len(".gz")])):
                continue
            errors = []
            for mirror in self.mirrors:
                try:
                    download_and_extract_archive(mirror + filename, self.raw_folder, filename, md5)
                    break
                except (URLError, OSError, RuntimeError) as error:
                    print(f"Failed to download {mirror}{filename}: {error}", file=sys.stderr)
                    errors.append(f"Tried {mirror}, got:\n{error}")
            else:
                raise RuntimeError(f"Error downloading {filename}:\n" + "\n".join(errors))

    def label_array(self) -> np.ndarray:
        return self.targets


class FashionMNIST(MNIST):
    """Zalando's Fashion-MNIST: the MNIST format with ten kinds of clothing."""

    mirrors: ClassVar[list[str]] = ["http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"]
    resources: ClassVar[list[tuple[str, str]]] = [
        ("train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
        ("train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe"),
        ("t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79"),
        ("t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310"),
    ]
    classes: ClassVar[list[str]] = [
        "T-shirt/top",
        "Trouser",
        "Pullover",
        "Dress",
        "Coat",
        "Sandal",
        "Shirt",
        "Sneaker",
        "Bag",
        "Ankle boot",
    ]
