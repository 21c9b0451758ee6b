"""ImageShards: (image, label) samples from WebDataset-format tar shards, like ImageFolder.

The class names travel beside the shards in ``classes.json`` (:data:`CLASSES_FILE`), which
``flowloader make-shards`` writes into the shards' folder: a JSON object whose ``"classes"``
is the list of class names in index order (``{"classes": ["cat", "dog"]}``: label 0 is
"cat"). Shards without it (made by other tools) have no ``classes`` / ``class_to_idx``.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

from flowloader.shards import ShardedDataset, remote
from flowloader.shards.urls import is_remote, local_path

from ..decode import located
from ..plan import Plan
from .planned import PlannedImageDataset

CLASSES_FILE = "classes.json"


class ImageShards(PlannedImageDataset):
    """Sample ``i`` is (the image in member ``image_key``, the int in member ``label_key``)
    of the shards' ``i``-th sample, through ``transform`` and ``target_transform``, as
    ImageFolder gives (image, class index).

    It has ImageFolder's fast paths: the first crop or resize planned from the JPEG header
    (``reduced_decode=False`` for torchvision's numerics exactly) and batches converted
    straight into one array. Other keyword arguments go to
    :class:`flowloader.shards.ShardedDataset` (``cache_dir``, ``storage_options``, ...).
    Shards made by ``flowloader make-shards`` from an ImageFolder have ``jpg`` (or the
    image's own extension) and ``cls`` members, and ``classes`` / ``class_to_idx`` as the
    ImageFolder had them, read on first use from the ``classes.json`` beside the first shard
    (through fsspec or HTTP for remote shards; present only when that file can be found).
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

    @property
    def classes(self) -> list[str]:
        """The class names in label order, as ImageFolder's ``classes``; AttributeError
        when no class record lies beside the first shard."""
        if self._recorded_classes is None:
            raise AttributeError(
                f"these shards carry no class names: there is no {CLASSES_FILE} beside "
                f"{self.shards.urls[0]} (flowloader make-shards records one when it packs an "
                "ImageFolder)"
            )
        return self._recorded_classes

    @property
    def class_to_idx(self) -> dict[str, int]:
        """Class name -> label, as ImageFolder's ``class_to_idx`` (AttributeError as
        :attr:`classes`)."""
        return {name: index for index, name in enumerate(self.classes)}

    @functools.cached_property
    def _recorded_classes(self) -> list[str] | None:
        """The class names recorded beside the first shard, or None; read once, on first
        use, so that making the dataset costs no extra read."""
        return read_classes(self.shards.urls[0], self.shards.cache.storage_options)

    def extra_repr(self) -> str:
        return f"Shards: {len(self.shards.urls)}"


def read_classes(shard: str, storage_options: dict[str, Any] | None = None) -> list[str] | None:
    """The class names in the :data:`CLASSES_FILE` in the folder of ``shard`` (a path or URL),
    or None when there is none."""
    if is_remote(shard):
        where = f"{shard.rsplit('/', 1)[0]}/{CLASSES_FILE}"
        data = remote.read_small(where, storage_options)
    else:
        where = os.path.join(os.path.dirname(local_path(shard)), CLASSES_FILE)
        try:
            with open(where, "rb") as stream:
                data = stream.read()
        except FileNotFoundError:
            data = None
    if data is None:
        return None
    try:
        classes = json.loads(data)["classes"]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{where} is not a class record ({error})") from error
    if not isinstance(classes, list) or not all(isinstance(name, str) for name in classes):
        raise ValueError(f"{where} is not a class record: 'classes' is not a list of names")
    return classes
