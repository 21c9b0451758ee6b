"""Vision datasets and transforms with torchvision's names, on NumPy and Pillow."""

from . import datasets, transforms
from .native import image_backend
from .plan import explain

__all__ = ["datasets", "explain", "image_backend", "transforms"]
