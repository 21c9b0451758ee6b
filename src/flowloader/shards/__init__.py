"""Sharded datasets: WebDataset-format tar shards, local or remote, read as map-style
datasets (exact resume, the same batches for any ``num_workers``) or as a stream."""

from .cache import ShardCache
from .dataset import ShardedDataset
from .remote import RemoteShardError
from .sampler import ShardSampler
from .stream import ShardStream
from .tar_index import ShardFormatError, ShardIndex
from .urls import expand_braces, shard_list
from .writer import write_shards

__all__ = [
    "RemoteShardError",
    "ShardCache",
    "ShardFormatError",
    "ShardIndex",
    "ShardSampler",
    "ShardStream",
    "ShardedDataset",
    "expand_braces",
    "shard_list",
    "write_shards",
]
