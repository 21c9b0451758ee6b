"""``torch.utils.data.distributed``'s names."""

from flowloader.distributed import *  # noqa: F403
from flowloader.distributed import __all__ as __all__
