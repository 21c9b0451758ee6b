"""flowloader: PyTorch's torch.utils.data API on NumPy, fast, robust and resumable.

The subpackages ``flowloader.utils`` (the PyTorch drop-in) and ``flowloader.vision`` load on
first use, as ``torch.utils.data`` does after ``import torch``: plain ``import flowloader``
does not pay for Pillow or the vision code.
"""

import importlib
import types
from typing import Any

from ._iter.iterator import DataLoaderIterator
from ._worker.info import WorkerInfo, get_worker_info
from .block_shuffle import BlockShuffleSampler
from .collate import default_collate, default_convert
from .dataloader import DataLoader
from .dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from .distributed import DistributedSampler
from .mixture import Mixture, MixtureBatchSampler
from .randomness import SampleRngs, SampleSeeds, sample_context, sample_rng
from .sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from .sharding import shard_stream

__version__ = "0.1.0"

__all__ = [
    "BatchSampler",
    "BlockShuffleSampler",
    "ChainDataset",
    "ConcatDataset",
    "DataLoader",
    "DataLoaderIterator",
    "Dataset",
    "DistributedSampler",
    "IterableDataset",
    "Mixture",
    "MixtureBatchSampler",
    "RandomSampler",
    "SampleRngs",
    "SampleSeeds",
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
assert __all__ == sorted(__all__)

# Public subpackages reached as attributes without their own import statement.
_LAZY_SUBPACKAGES = frozenset({"shards", "tables", "text", "utils", "vision"})


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")  # also binds it as an attribute
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names, the lazy subpackages and the submodules loaded so far; not what this
    file imports for itself (``importlib``, ``Any``)."""
    submodules = {
        name
        for name, value in globals().items()
        if isinstance(value, types.ModuleType) and value.__name__.startswith(f"{__name__}.")
    }
    return sorted({*__all__, *_LAZY_SUBPACKAGES, *submodules, "__version__"})
