"""Thread workers or worker processes? flowloader's DataLoader with worker_method="thread" and
with its default worker processes, side by side with torch's DataLoader (processes), on the
same datasets, batch size and worker count: samples/s, CPU seconds per 1,000 samples, and the
PSS of the whole process tree (the training process plus its workers) sampled mid-run.

Pipelines: the ImageNet training and validation pipelines over flowloader bench's built-in
ImageFolder (2,000 JPEGs of 500x375, batch 64), each ending in ToTensor + Normalize (float32)
and in PILToTensor (uint8); MNIST and CIFAR-10 (generated files in the
real formats, the seed examples' transforms, one whole epoch); torchvision's ImageFolder with
torchvision's transforms through each loader (needs torchvision: a separate environment).

    python -m benchmarks.threads_vs_processes [--workers 2] [--batches 30] [--runs 3]
        [--pipeline NAME ...]
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections.abc import Callable
from typing import Any

from .common import environment, median, write_json
from .imagenet import _cpu_s
from .worker_memory import total_pss

SIDES = ("processes", "threads", "torch")


def _flowloader(worker_method: str) -> Callable[..., Any]:
    import flowloader as fl

    def make(ds: Any, **options: Any) -> Any:
        return fl.DataLoader(ds, worker_method=worker_method, **options)

    return make


def _torch_loader(ds: Any, **options: Any) -> Any:
    import torch.utils.data

    return torch.utils.data.DataLoader(ds, **options)


def _run(loader: Any, batches: int | None) -> dict[str, float]:
    """Samples/s and CPU s per 1,000 samples over ``batches`` batches after the first (None:
    the rest of the epoch), and the tree's PSS in MiB halfway."""
    iterator = iter(loader)
    total = len(loader) - 1 if batches is None else batches
    next(iterator)
    cpu, start, samples, pss = _cpu_s(), time.perf_counter(), 0, 0
    for k, batch in zip(range(total), iterator, strict=False):
        samples += len(batch[0])
        if k == total // 2:
            pss = total_pss(iterator)
    elapsed = time.perf_counter() - start
    del iterator  # worker processes exit and are reaped, so their CPU time is counted
    return {
        "samples_per_s": samples / elapsed,
        "cpu_s_per_1000": (_cpu_s() - cpu) / samples * 1000,
        "pss_mib": pss / 2**20,
    }


def _pipelines(
    with_torchvision: bool, batches: int
) -> dict[str, tuple[Callable[[], Any], int, int | None]]:
    """name -> (dataset factory, batch size, batches to time (None: one epoch))."""
    from flowloader.cli import pipelines, sample_data
    from flowloader.vision import datasets, transforms

    from . import cifar, mnist

    root = sample_data.builtin("imagenet-like")

    def imagenet(pipeline: str, uint8: bool = False) -> Callable[[], Any]:
        return lambda: pipelines.dataset(pipeline, root, datasets, transforms, uint8)

    def mnist_dataset() -> Any:
        normalize = transforms.Normalize((0.1307,), (0.3081,))
        transform = transforms.Compose([transforms.ToTensor(), normalize])
        return datasets.MNIST(mnist.ensure_data(), train=True, transform=transform)

    def cifar_dataset() -> Any:
        normalize = transforms.Normalize(cifar.MEAN, cifar.STD)
        transform = transforms.Compose([transforms.ToTensor(), normalize])
        return datasets.CIFAR10(cifar.ensure_data(), train=True, transform=transform)

    found: dict[str, tuple[Callable[[], Any], int, int | None]] = {
        "imagenet-train": (imagenet("imagenet-train"), 64, batches),
        "imagenet-train uint8": (imagenet("imagenet-train", uint8=True), 64, batches),
        "imagenet-val": (imagenet("imagenet-val"), 64, batches),
        "imagenet-val uint8": (imagenet("imagenet-val", uint8=True), 64, batches),
        "MNIST": (mnist_dataset, 64, None),
        "CIFAR-10": (cifar_dataset, 128, None),
    }
    if with_torchvision:
        from . import torch_datasets

        found["torchvision ImageFolder (train)"] = (
            lambda: torch_datasets.dataset("imagenet-train"),
            64,
            batches,
        )
    return found


def measure(workers: int, batches: int, runs: int, only: list[str] | None = None) -> list[dict]:
    has_torch = importlib.util.find_spec("torchvision") is not None
    makers = {"processes": _flowloader("multiprocessing"), "threads": _flowloader("thread")}
    if has_torch:
        makers["torch"] = _torch_loader
    records = []
    for name, (factory, batch_size, count) in _pipelines(has_torch, batches).items():
        if only and name not in only:
            continue
        ds = factory()
        runs_by_side: dict[str, list[dict[str, float]]] = {side: [] for side in makers}
        for _ in range(runs):
            for side, make in makers.items():
                loader = make(ds, batch_size=batch_size, shuffle=True, num_workers=workers)
                runs_by_side[side].append(_run(loader, count))
        records.append({"pipeline": name, "workers": workers, "runs": runs_by_side})
    return records


def _medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: median([r[key] for r in runs]) for key in runs[0]}


def table(records: list[dict]) -> str:
    lines = [
        "| pipeline | processes samples/s | threads samples/s | threads / processes | "
        "torch samples/s | CPU s/1000: processes, threads | tree PSS MiB: processes, threads |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in records:
        m = {side: _medians(runs) for side, runs in r["runs"].items()}
        proc, thr = m["processes"], m["threads"]
        torch_rate = f"{m['torch']['samples_per_s']:,.0f}" if "torch" in m else "-"
        lines.append(
            f"| {r['pipeline']} | {proc['samples_per_s']:,.0f} | {thr['samples_per_s']:,.0f} | "
            f"**{thr['samples_per_s'] / proc['samples_per_s']:.2f}x** | {torch_rate} | "
            f"{proc['cpu_s_per_1000']:.2f}, {thr['cpu_s_per_1000']:.2f} | "
            f"{proc['pss_mib']:.0f}, {thr['pss_mib']:.0f} |"
        )
    return "\n".join(lines)


def section(quick: bool = False) -> str:
    return table(measure(workers=2, batches=10 if quick else 30, runs=1 if quick else 3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pipeline", action="append", help="only these (repeatable)")
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    records = measure(args.workers, args.batches, args.runs, args.pipeline)
    print(table(records))
    write_json(args.json, records)


if __name__ == "__main__":
    main()
