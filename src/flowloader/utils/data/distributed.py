"""``torch.utils.data.distributed``'s names (torch's class too where torch is installed)."""

from flowloader._compat import torch as _torch
from flowloader.distributed import *  # noqa: F403
from flowloader.distributed import __all__ as __all__

if _torch.installed():
    from ._torch_samplers import DistributedSampler as DistributedSampler
