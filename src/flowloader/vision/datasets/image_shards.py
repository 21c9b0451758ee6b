"""ImageShards: (image, label) samples from WebDataset-format tar shards, like ImageFolder."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from flowloader.shards import ShardedDataset

from ..decode import located
from ..plan import Plan
from .planned import PlannedImageDataset


class ImageShards(PlannedImageDataset):
    """Sample ``i`` is (the image in member ``image_key``, the int in member ``label_key``)
    of the shards' ``i``-th sample, through ``transform`` and ``target_transform``, as
    ImageFolder gives (image, class index).

    It has ImageFolder's fast paths: the first crop or resize planned from the JPEG header
    (``reduced_decode=False`` for torchvision's numerics exactly) and batches converted
    straight into one array. Other keyword arguments go to
    :class:`flowloader.shards.ShardedDataset` (``cache_dir``, ``storage_options``, ...).
    Shards made by ``flowloader make-shards`` from an ImageFolder have ``jpg`` (or the
    image's own extension) and ``cls`` members.
    """

    def __init__(
        self,
        urls: str | os.PathLike | Sequence[str],
        transform: Callable | None = None,
        target_transform: Callable | None = None,
        image_key: str = "jpg",
        label_key: str = "cls",
        *,
        reduced_decode: bool = True,
        **shard_options: Any,
    ) -> None:
        super().__init__(None, transform=transform, target_transform=target_transform)
        self.shards = ShardedDataset(urls, **shard_options)
        self.image_key, self.label_key = image_key, label_key
        self.reduced_decode = reduced_decode

    def __len__(self) -> int:
        return len(self.shards)

    def shard_sizes(self) -> list[int]:
        """The samples per shard (for :class:`flowloader.shards.ShardSampler`)."""
        return self.shards.shard_sizes()

    def prefetch(self, shards: Sequence[int]) -> None:
        self.shards.prefetch(shards)

    def _load(
        self, index: int, plan: Plan, rng: Any, contents: bytes | None = None
    ) -> tuple[Any, int]:
        sample = self.shards.raw(index)
        where = f"{sample['__url__']} (key {sample['__key__']!r})"
        try:
            for key in (self.image_key, self.label_key):
                if key not in sample:
                    members = sorted(k for k in sample if not k.startswith("__"))
                    raise KeyError(f"no member {key!r}; the sample has {members}")
            target = int(sample[self.label_key])
            image = sample[self.image_key]
            return plan.load(image, rng, self.reduced_decode, where, index), target
        except Exception as error:
            raise located(error, where, index) from error

    def extra_repr(self) -> str:
        return f"Shards: {len(self.shards.urls)}"
