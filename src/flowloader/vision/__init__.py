"""Vision datasets and transforms with torchvision's names, on NumPy and Pillow."""

from . import datasets, transforms
from .native import image_backend

__all__ = ["datasets", "image_backend", "transforms"]
