"""CIFAR-10, flowloader against torch.utils.data + torchvision.

CIFAR-10 (50,000 generated 32x32 RGB images in the real batch-pickle format) +
Compose([ToTensor(), Normalize(mean, std)]), batch_size=128, shuffle=True, one epoch per run;
samples/s at each worker count. Both libraries read the same files; torchvision's md5 check of
the files (which generated data cannot pass) is switched off, and construction is not timed.

    python -m benchmarks.cifar [--workers 0,2] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile

from .common import alternate_epochs, environment, epochs_table, report
from .mnist import _epoch

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261)
ROOT = os.path.join(tempfile.gettempdir(), "flowloader-bench-cifar")


def flowloader_epoch(root: str, workers: int, worker_method: str = "multiprocessing") -> float:
    import flowloader as fl
    from flowloader.vision import datasets, transforms

    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    ds = datasets.CIFAR10(root, train=True, transform=transform)
    loader = fl.DataLoader(
        ds, batch_size=128, shuffle=True, num_workers=workers, worker_method=worker_method
    )
    return _epoch(loader, len(ds))


def flowloader_thread_epoch(root: str, workers: int) -> float:
    """The same epoch with worker_method="thread"."""
    return flowloader_epoch(root, workers, "thread")


def torch_epoch(root: str, workers: int) -> float:
    import torch.utils.data
    import torchvision.datasets.cifar
    from torchvision import transforms

    torchvision.datasets.cifar.check_integrity = lambda path, md5=None: os.path.isfile(path)
    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize(MEAN, STD)])
    ds = torchvision.datasets.CIFAR10(root, train=True, transform=transform)
    loader = torch.utils.data.DataLoader(ds, batch_size=128, shuffle=True, num_workers=workers)
    return _epoch(loader, len(ds))


def ensure_data(root: str = ROOT) -> str:
    from flowloader.vision.datasets import make_cifar

    if not os.path.isfile(os.path.join(root, "cifar-10-batches-py", "batches.meta")):
        make_cifar(root, train_size=50000, test_size=10000)
    return root


def measure(workers: int, runs: int) -> dict[str, list[float]]:
    root = ensure_data()
    sides = {"flowloader": flowloader_epoch, "torch": torch_epoch}
    if workers:
        sides["flowloader threads"] = flowloader_thread_epoch
    return alternate_epochs(sides, root, workers, runs)


def section(quick: bool = False) -> str:
    return epochs_table(measure, 1 if quick else 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="0,2")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(environment())
    for workers in (int(w) for w in args.workers.split(",")):
        results = measure(workers, args.runs)
        report(f"CIFAR-10 epoch, batch 128, num_workers={workers}", "samples/s", results, True)


if __name__ == "__main__":
    main()
