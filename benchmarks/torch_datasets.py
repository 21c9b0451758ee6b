"""PyTorch users' own datasets through flowloader's DataLoader: torchvision's ImageFolder +
transforms, and a custom torch Dataset returning tensors, each through torch.utils.data's
DataLoader and flowloader.DataLoader (the same dataset object), samples/s and CPU seconds per
1,000 samples. Hypothesis: torch code in workers runs as fast under flowloader as under torch
(one intra-op thread per worker, tensors collated straight into shared memory).

imagenet-train / -val: torchvision.datasets.ImageFolder over flowloader bench's built-in
ImageFolder (2,000 JPEGs of 500x375) with torchvision's transforms, batch 64.
custom tensors: a torch Dataset over a uint8 (N, 3, 96, 96) tensor that converts, flips and
normalises each sample with torch ops, returning (float32 tensor, int64 tensor), batch 64.

    python -m benchmarks.torch_datasets [--workers 0,2] [--batches 30] [--runs 3]
"""

from __future__ import annotations

import argparse

from .common import (
    environment,
    print_throughput,
    throughput_record,
    throughput_table,
    write_json,
)
from .imagenet import time_batches

PIPELINES = ("imagenet-train", "imagenet-val", "custom tensors")


class TorchTensorDataset:
    """A custom torch-based dataset: every sample goes through torch ops."""

    def __init__(self, count: int = 4096, size: int = 96) -> None:
        import torch

        generator = torch.Generator().manual_seed(0)
        self.images = torch.randint(
            0, 256, (count, 3, size, size), dtype=torch.uint8, generator=generator
        )
        self.labels = torch.randint(0, 10, (count,), generator=generator)
        self.mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
        self.std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int):
        image = self.images[index].float().div_(255)
        if index % 2:
            image = image.flip(-1)
        return (image - self.mean) / self.std, self.labels[index]


def dataset(pipeline: str):
    if pipeline == "custom tensors":
        return TorchTensorDataset()
    from torchvision import datasets, transforms

    from flowloader.cli import pipelines, sample_data

    root = sample_data.builtin("imagenet-like")
    return pipelines.dataset(pipeline, root, datasets, transforms)


def loader_class(library: str):
    if library == "torch":
        import torch.utils.data

        return torch.utils.data.DataLoader
    import flowloader

    return flowloader.DataLoader


def measure(library: str, ds, workers: int, batches: int) -> tuple[float, float]:
    """(samples/s, CPU seconds per 1,000 samples) over ``batches`` batches after the first."""
    loader = loader_class(library)(ds, batch_size=64, shuffle=True, num_workers=workers)
    return time_batches(loader, batches)


def run(workers: tuple[int, ...] = (0, 2), batches: int = 30, runs: int = 3) -> list[dict]:
    records = []
    for pipeline in PIPELINES:
        ds = dataset(pipeline)
        for count in workers:
            # Without workers the image pipelines run at a third of the speed: fewer batches.
            n = batches if count or pipeline == "custom tensors" else max(batches // 3, 3)
            results: dict[str, list[tuple[float, float]]] = {"flowloader": [], "torch": []}
            for _ in range(runs):
                for library in results:
                    results[library].append(measure(library, ds, count, n))
            record = throughput_record(pipeline, count, results)
            records.append(record)
    return records


def section(quick: bool = False) -> str:
    records = run(batches=6 if quick else 30, runs=1 if quick else 3)
    return throughput_table(records, "dataset")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="0,2")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    workers = tuple(int(w) for w in args.workers.split(","))
    records = run(workers, args.batches, args.runs)
    print_throughput(records)
    write_json(args.json, records)


if __name__ == "__main__":
    main()
