"""Ray workers on one node: flowloader with ``worker_method="ray"`` against its own worker
processes, against Ray Data doing the same work on the same Ray instance and CPUs, and time to
the first batch against torch's DataLoader.

The pipeline is the ImageNet training pipeline over ``flowloader bench``'s built-in
ImageFolder (2,000 JPEGs of 500x375; decode + RandomResizedCrop 224 + flip + normalise to
float32, the native kernel), batch 64, 2 workers. Ray Data runs the very same per-sample
code (the same ImageFolder's ``__getitem__``) in ``map_batches`` over a shuffled range of
indices, with ``iter_torch_batches(batch_size=64)``, with and without ``preserve_order``:
what differs is only the engine around the work. Rounds alternate the sides; the ratios are
of medians. Needs Ray (``ray[data]`` for the Ray Data side) and torch in the environment:

    python -m benchmarks.ray_transport [--batches 20] [--runs 3] [--json out.json]

Runs a local Ray instance on loopback (``num_cpus`` = the workers), without the dashboard or
usage statistics.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

from .common import environment, median, write_json

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

BATCH = 64


def _dataset() -> Any:
    from flowloader.cli import pipelines, sample_data
    from flowloader.vision import datasets, transforms

    return pipelines.dataset(
        "imagenet-train", sample_data.builtin("imagenet-like"), datasets, transforms
    )


def _timed(batches: Any, count: int) -> tuple[float, float]:
    """(seconds to the first batch, samples/s over the next ``count`` batches)."""
    start = time.perf_counter()
    iterator = iter(batches)
    first = next(iterator)
    to_first = time.perf_counter() - start
    start, samples = time.perf_counter(), 0
    for _, batch in zip(range(count), iterator, strict=False):
        samples += len(batch[0]) if isinstance(batch, (list, tuple)) else len(batch["image"])
    rate = samples / (time.perf_counter() - start)
    del first, iterator
    return to_first, rate


def flowloader_side(method: str, workers: int) -> Callable[[Any, int], tuple[float, float]]:
    import flowloader as fl

    def run(dataset: Any, count: int) -> tuple[float, float]:
        loader = fl.DataLoader(
            dataset, batch_size=BATCH, shuffle=True, num_workers=workers, worker_method=method
        )
        return _timed(loader, count)

    return run


def torch_side(workers: int) -> Callable[[Any, int], tuple[float, float]]:
    import torch.utils.data

    def run(dataset: Any, count: int) -> tuple[float, float]:
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=BATCH, shuffle=True, num_workers=workers
        )
        return _timed(loader, count)

    return run


def ray_data_side(preserve_order: bool, workers: int) -> Callable[[Any, int], tuple[float, float]]:
    import numpy as np
    import ray

    def run(dataset: Any, count: int) -> tuple[float, float]:
        context = ray.data.DataContext.get_current()
        context.execution_options.preserve_order = preserve_order
        context.enable_progress_bars = False

        def load(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            samples = [dataset[int(i)] for i in batch["id"]]
            return {
                "image": np.stack([s[0] for s in samples]),
                "label": np.array([s[1] for s in samples]),
            }

        pipeline = (
            ray.data.range(len(dataset), override_num_blocks=len(dataset) // BATCH)
            .random_shuffle()
            .map_batches(load, batch_size=BATCH, concurrency=workers)
        )
        return _timed(pipeline.iter_torch_batches(batch_size=BATCH), count)

    return run


def measure(workers: int, batches: int, runs: int) -> dict[str, dict[str, list[float]]]:
    import ray

    dataset = _dataset()
    dataset[0]  # the files in the page cache for every side
    ray.init(
        num_cpus=workers,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )
    sides: dict[str, Callable[[Any, int], tuple[float, float]]] = {
        "flowloader, worker processes": flowloader_side("multiprocessing", workers),
        "flowloader, Ray workers": flowloader_side("ray", workers),
        "torch DataLoader, worker processes": torch_side(workers),
    }
    try:
        import ray.data

        sides["Ray Data, preserve_order=False"] = ray_data_side(False, workers)
        sides["Ray Data, preserve_order=True"] = ray_data_side(True, workers)
    except ImportError:
        print("Ray Data is not installed (pip install 'ray[data]'): its sides are left out")
    results: dict[str, dict[str, list[float]]] = {
        name: {"first_batch_s": [], "samples_per_s": []} for name in sides
    }
    try:
        for _ in range(runs):
            for name, run in sides.items():
                to_first, rate = run(dataset, batches)
                results[name]["first_batch_s"].append(to_first)
                results[name]["samples_per_s"].append(rate)
                print(f"{name}: first batch {to_first:.2f} s, {rate:,.0f} samples/s", flush=True)
    finally:
        ray.shutdown()
    return results


def table(results: dict[str, dict[str, list[float]]]) -> str:
    processes = median(results["flowloader, worker processes"]["samples_per_s"])
    ray_workers = median(results["flowloader, Ray workers"]["samples_per_s"])
    torch_first = median(results["torch DataLoader, worker processes"]["first_batch_s"])
    lines = [
        "| loader | samples/s (median) | flowloader Ray workers / this | first batch s "
        "(median) | minus torch's |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, runs in results.items():
        rate, first = median(runs["samples_per_s"]), median(runs["first_batch_s"])
        lines.append(
            f"| {name} | {rate:,.0f} | {ray_workers / rate:.2f}x | {first:.2f} | "
            f"{first - torch_first:+.2f} |"
        )
    lines.append("")
    lines.append(f"Ray workers / worker processes: **{ray_workers / processes:.2f}x**")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    results = measure(args.workers, args.batches, args.runs)
    print(table(results))
    write_json(args.json, [results])


if __name__ == "__main__":
    main()
