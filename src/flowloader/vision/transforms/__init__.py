"""torchvision-compatible transforms on PIL images and NumPy arrays."""

from . import functional
from .augment import RandomAffine, RandomErasing, RandomGrayscale, RandomRotation, ToDtype
from .compose import Compose
from .functional import InterpolationMode
from .mixing import CutMix, MixUp
from .transforms import (
    CenterCrop,
    ColorJitter,
    Grayscale,
    Lambda,
    Normalize,
    Pad,
    PILToTensor,
    RandomCrop,
    RandomHorizontalFlip,
    RandomResizedCrop,
    RandomVerticalFlip,
    Resize,
    ToTensor,
)

__all__ = [
    "CenterCrop",
    "ColorJitter",
    "Compose",
    "CutMix",
    "Grayscale",
    "InterpolationMode",
    "Lambda",
    "MixUp",
    "Normalize",
    "PILToTensor",
    "Pad",
    "RandomAffine",
    "RandomCrop",
    "RandomErasing",
    "RandomGrayscale",
    "RandomHorizontalFlip",
    "RandomResizedCrop",
    "RandomRotation",
    "RandomVerticalFlip",
    "Resize",
    "ToDtype",
    "ToTensor",
    "functional",
]
