"""The seed's MNIST example, flowloader against torch.utils.data + torchvision.

MNIST (60,000 generated 28x28 digits in the real IDX format) +
Compose([ToTensor(), Normalize((0.1307,), (0.3081,))]), batch_size=64, shuffle=True, one
epoch per run; samples/s at each worker count. Both libraries read the same files. Needs
torchvision for the comparison (a separate environment: see benchmarks/RESULTS.md).

    python -m benchmarks.mnist [--workers 0,2] [--runs 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from .common import alternate_epochs, environment, epochs_table, report, write_json


def flowloader_epoch(
    root: str, workers: int, worker_method: str = "multiprocessing", dropin: bool = False
) -> float:
    import flowloader as fl
    from flowloader.vision import datasets, transforms

    transform = transforms.Compose(
        [transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))]
    )
    ds = datasets.MNIST(root, train=True, transform=transform)
    if dropin:  # a ported script's loader: torch's types, tensors from default_collate
        import flowloader.utils.data

        loader_class = flowloader.utils.data.DataLoader
    else:
        loader_class = fl.DataLoader
    loader = loader_class(
        ds, batch_size=64, shuffle=True, num_workers=workers, worker_method=worker_method
    )
    return _epoch(loader, len(ds))


def dropin_epoch(root: str, workers: int) -> float:
    """The same epoch through flowloader.utils.data.DataLoader (batches are tensors)."""
    return flowloader_epoch(root, workers, dropin=True)


def flowloader_thread_epoch(root: str, workers: int) -> float:
    """The same epoch with worker_method="thread"."""
    return flowloader_epoch(root, workers, "thread")


def torch_epoch(root: str, workers: int) -> float:
    import torch.utils.data
    from torchvision import datasets, transforms

    transform = transforms.Compose(
        [transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))]
    )
    ds = datasets.MNIST(root, train=True, transform=transform)
    loader = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True, num_workers=workers)
    return _epoch(loader, len(ds))


def _epoch(loader, size: int) -> float:
    start = time.perf_counter()
    seen = 0
    for images, _ in loader:
        seen += len(images)
    assert seen == size
    return seen / (time.perf_counter() - start)


DEFAULT_ROOT = os.path.join(tempfile.gettempdir(), "flowloader-bench-mnist")


def ensure_data(root: str = DEFAULT_ROOT) -> str:
    """The 60,000 + 10,000 generated digits under ``root`` (written once)."""
    from flowloader.vision.datasets import make_mnist

    if not os.path.isdir(os.path.join(root, "MNIST", "raw")):
        print(f"writing 60,000 MNIST-format digits to {root} ...")
        make_mnist(root, train_size=60000, test_size=10000)
    return root


def measure(workers: int, runs: int, root: str = DEFAULT_ROOT) -> dict[str, list[float]]:
    """Each loader's samples/s over ``runs`` interleaved epochs (writes the data once)."""
    ensure_data(root)
    sides = {"flowloader": flowloader_epoch, "torch": torch_epoch, "drop-in": dropin_epoch}
    if workers:
        sides["flowloader threads"] = flowloader_thread_epoch
    return alternate_epochs(sides, root, workers, runs)


def section(quick: bool = False) -> str:
    return epochs_table(measure, 1 if quick else 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="0,2")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--data", default=DEFAULT_ROOT)
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    ensure_data(args.data)
    try:
        import torchvision  # noqa: F401

        sides = {"flowloader": flowloader_epoch, "torch": torch_epoch, "drop-in": dropin_epoch}
    except ImportError:
        print("torchvision is not importable: measuring flowloader alone")
        sides = {"flowloader": flowloader_epoch}
    records = []
    for workers in (int(w) for w in args.workers.split(",")):
        chosen = dict(sides)
        if workers:
            chosen["flowloader threads"] = flowloader_thread_epoch
        results = alternate_epochs(chosen, args.data, workers, args.runs)
        records.append(
            report(
                f"MNIST epoch, batch 64, shuffle, num_workers={workers}", "samples/s", results, True
            )
        )
    write_json(args.json, records)


if __name__ == "__main__":
    main()
