"""The dataset the framework scripts (lightning_ddp.py, accelerate_ranks.py) train on: sample
``i`` is a 2-vector of ``i`` and its id, so each rank can report which samples it got."""

from __future__ import annotations

import torch

from flowloader.utils.data import DataLoader, Dataset

SAMPLES = 50


class Ids(Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return torch.full((2,), float(i)), i


def shuffled_loader() -> DataLoader:
    """The loader both frameworks get: batches of 4, shuffled, 2 worker processes."""
    return DataLoader(Ids(SAMPLES), batch_size=4, shuffle=True, num_workers=2)
