"""VisionDataset: the base of the vision datasets (root, transforms, a readable repr)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import flowloader as fl


def checked_targets(targets: Any, current: np.ndarray) -> np.ndarray:
    """New labels for a dataset that reads and assigns ``targets`` as a list but keeps them
    as int64 (so workers share them): one per sample, or ValueError."""
    values = np.asarray(targets, dtype=np.int64)
    if values.shape != current.shape:
        raise ValueError(f"expected {len(current)} targets, got {len(values)}")
    return values


class StandardTransform:
    """Apply ``transform`` to the input and ``target_transform`` to the target."""

    def __init__(
        self, transform: Callable | None = None, target_transform: Callable | None = None
    ) -> None:
        self.transform = transform
        self.target_transform = target_transform

    def __call__(self, sample: Any, target: Any) -> tuple[Any, Any]:
        if self.transform is not None:
            sample = self.transform(sample)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return sample, target

    def __repr__(self) -> str:
        lines = [type(self).__name__]
        if self.transform is not None:
            lines.append(f"Transform: {self.transform!r}")
        if self.target_transform is not None:
            lines.append(f"Target transform: {self.target_transform!r}")
        return "\n".join(lines)


class VisionDataset(fl.Dataset):
    """Base class: ``transforms`` (applied to (input, target)) or ``transform`` and
    ``target_transform`` separately, as in torchvision."""

    _repr_indent = 4

    def __init__(
        self,
        root: str | Path | None = None,
        transforms: Callable | None = None,
        transform: Callable | None = None,
        target_transform: Callable | None = None,
    ) -> None:
        self.root = os.path.expanduser(root) if isinstance(root, str) else root
        has_separate = transform is not None or target_transform is not None
        if transforms is not None and has_separate:
            raise ValueError(
                "Only transforms or transform/target_transform can be passed as argument"
            )
        self.transform = transform
        self.target_transform = target_transform
        if has_separate:
            transforms = StandardTransform(transform, target_transform)
        self.transforms = transforms

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must implement __len__")

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        body = [f"Number of datapoints: {len(self)}"]
        if self.root is not None:
            body.append(f"Root location: {self.root}")
        body += self.extra_repr().splitlines()
        if self.transforms is not None:
            body += repr(self.transforms).splitlines()
        indent = " " * self._repr_indent
        return "\n".join([f"Dataset {type(self).__name__}", *(indent + line for line in body)])
