"""``torch.utils.data.dataset``'s names (also torch's classes where torch is installed)."""

from flowloader._compat import torch as _torch
from flowloader.dataset import *  # noqa: F403
from flowloader.dataset import __all__ as __all__

if _torch.installed():
    from ._torch_datasets import *  # noqa: F403
