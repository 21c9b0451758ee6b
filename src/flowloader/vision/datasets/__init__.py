"""torchvision-compatible datasets: MNIST, FashionMNIST, DatasetFolder, ImageFolder, FakeData."""

from .fake import FakeData, make_image_folder, make_mnist
from .folder import (
    IMG_EXTENSIONS,
    DatasetFolder,
    ImageFolder,
    default_loader,
    find_classes,
    has_file_allowed_extension,
    make_dataset,
)
from .mnist import MNIST, FashionMNIST
from .vision import StandardTransform, VisionDataset

__all__ = [
    "IMG_EXTENSIONS",
    "MNIST",
    "DatasetFolder",
    "FakeData",
    "FashionMNIST",
    "ImageFolder",
    "StandardTransform",
    "VisionDataset",
    "default_loader",
    "find_classes",
    "has_file_allowed_extension",
    "make_dataset",
    "make_image_folder",
    "make_mnist",
]
