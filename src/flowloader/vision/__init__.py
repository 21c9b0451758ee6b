"""Vision datasets and transforms with torchvision's names, on NumPy and Pillow."""

from . import datasets, transforms

__all__ = ["datasets", "transforms"]
