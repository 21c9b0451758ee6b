"""PyTorch-style import paths: ``flowloader.utils.data`` mirrors ``torch.utils.data``."""

from . import data as data
