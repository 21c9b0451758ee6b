"""The PyTorch drop-in: ``torch.utils.data``'s names and submodules, handing out torch tensors.

Every name is flowloader's own object except :class:`DataLoader`, whose ``output`` defaults to
``"torch"`` here, so code ported from ``torch.utils.data`` by renaming the module keeps getting
tensors. ``flowloader.DataLoader`` is the NumPy-first loader for every framework.
"""

from flowloader import *  # noqa: F403
from flowloader import __all__ as __all__  # torch.utils.data's names, plus our additions

# The submodules ported code imports by path (torch.utils.data.distributed, ...).
from . import dataloader as dataloader
from . import dataset as dataset
from . import distributed as distributed
from . import sampler as sampler
from .dataloader import DataLoader as DataLoader  # replaces flowloader.DataLoader here
