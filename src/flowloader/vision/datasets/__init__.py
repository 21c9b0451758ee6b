"""torchvision-compatible datasets: MNIST, FashionMNIST, CIFAR10, CIFAR100, DatasetFolder,
ImageFolder, FakeData, ImageShards (tar shards) and ImageTable (a table's image column)."""

from .cifar import CIFAR10, CIFAR100
from .fake import FakeData, make_cifar, make_image_folder, make_mnist
from .folder import (
    IMG_EXTENSIONS,
    DatasetFolder,
    ImageFolder,
    default_loader,
    find_classes,
    has_file_allowed_extension,
    make_dataset,
)
from .image_shards import ImageShards
from .image_table import ImageTable
from .mnist import MNIST, FashionMNIST
from .vision import StandardTransform, VisionDataset

__all__ = [
    "CIFAR10",
    "CIFAR100",
    "IMG_EXTENSIONS",
    "MNIST",
    "DatasetFolder",
    "FakeData",
    "FashionMNIST",
    "ImageFolder",
    "ImageShards",
    "ImageTable",
    "StandardTransform",
    "VisionDataset",
    "default_loader",
    "find_classes",
    "has_file_allowed_extension",
    "make_cifar",
    "make_dataset",
    "make_image_folder",
    "make_mnist",
]
