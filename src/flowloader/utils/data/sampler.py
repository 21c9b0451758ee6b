"""``torch.utils.data.sampler``'s names."""

from flowloader.sampler import *  # noqa: F403
from flowloader.sampler import __all__ as __all__
