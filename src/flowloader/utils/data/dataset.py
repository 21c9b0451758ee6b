"""``torch.utils.data.dataset``'s names."""

from flowloader.dataset import *  # noqa: F403
from flowloader.dataset import __all__ as __all__
