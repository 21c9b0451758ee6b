"""The PyTorch drop-in: ``torch.utils.data``'s names and submodules, handing out torch tensors.

Every name is flowloader's own object except :class:`DataLoader`, whose ``output`` defaults to
``"torch"`` here, so code ported from ``torch.utils.data`` by renaming the module keeps getting
tensors. ``flowloader.DataLoader`` is the NumPy-first loader for every framework.
"""

from flowloader import (
    BatchSampler,
    ChainDataset,
    ConcatDataset,
    Dataset,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
    StackDataset,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    WorkerInfo,
    default_collate,
    default_convert,
    get_worker_info,
    random_split,
    sample_context,
    sample_rng,
    shard_stream,
)

# The submodules ported code imports by path (torch.utils.data.distributed, ...).
from . import dataloader as dataloader
from . import dataset as dataset
from . import distributed as distributed
from . import sampler as sampler
from .dataloader import DataLoader

__all__ = [  # torch.utils.data's names (no submodules), plus our additions
    "BatchSampler",
    "ChainDataset",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "DistributedSampler",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "StackDataset",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "WeightedRandomSampler",
    "WorkerInfo",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "random_split",
    "sample_context",
    "sample_rng",
    "shard_stream",
]
