"""``torch.utils.data.sampler``'s names (also torch's classes where torch is installed)."""

from flowloader._compat import torch as _torch
from flowloader.sampler import *  # noqa: F403
from flowloader.sampler import __all__ as __all__

if _torch.installed():
    from ._torch_samplers import BatchSampler as BatchSampler
    from ._torch_samplers import RandomSampler as RandomSampler  # type: ignore[assignment]
    from ._torch_samplers import Sampler as Sampler
    from ._torch_samplers import SequentialSampler as SequentialSampler
    from ._torch_samplers import (  # type: ignore[assignment]
        SubsetRandomSampler as SubsetRandomSampler,
    )
    from ._torch_samplers import (  # type: ignore[assignment]
        WeightedRandomSampler as WeightedRandomSampler,
    )
