"""The PyTorch drop-in: ``torch.utils.data``'s names and submodules, handing out torch tensors.

Where torch is installed (importing this package imports it), the classes are torch's classes
too: ``DataLoader`` is a ``torch.utils.data.DataLoader`` running flowloader's engine, the
samplers and datasets subclass torch's, the random samplers and ``random_split`` give torch's
indices for torch's seeds, and ``default_collate`` gives tensors. So frameworks that check for
torch's types (Lightning, Accelerate) treat them as torch's. ``flowloader.DataLoader`` is the
NumPy-first loader for every framework, and needs no torch.
"""

from flowloader import *  # noqa: F403
from flowloader import __all__ as __all__  # torch.utils.data's names, plus our additions

# The submodules ported code imports by path (torch.utils.data.distributed, ...), and the names
# they replace.
from . import dataloader as dataloader
from . import dataset as dataset
from . import distributed as distributed
from . import sampler as sampler
from .dataloader import DataLoader as DataLoader
from .dataloader import default_collate as default_collate
from .dataloader import default_convert as default_convert
from .dataset import *  # noqa: F403
from .distributed import *  # noqa: F403
from .sampler import *  # noqa: F403
