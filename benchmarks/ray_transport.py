"""Ray workers on one node: flowloader with ``worker_method="ray"`` against its own worker
processes, against Ray Data doing the same work on the same Ray instance and CPUs, and time to
the first batch against torch's DataLoader.

The pipeline is the ImageNet training pipeline over ``flowloader bench``'s built-in
ImageFolder (2,000 JPEGs of 500x375; decode + RandomResizedCrop 224 + flip + normalise to
float32, the native kernel), batch 64, 2 workers. Ray Data runs the very same per-sample
code (the same ImageFolder's ``__getitem__``) in ``map_batches`` over a shuffled array of
indices (shuffled on the driver: no all-to-all shuffle), in a pool of as many tasks as
workers, with ``iter_torch_batches(batch_size=64)``, with and without ``preserve_order``:
what differs is only the engine around the work. Rounds alternate the sides; the ratios are
of medians. Needs Ray (``ray[data]`` for the Ray Data side) and torch in the environment:

    python -m benchmarks.ray_transport [--batches 20] [--runs 3] [--json out.json]

Runs a local Ray instance on loopback (``num_cpus`` = the workers), without the dashboard or
usage statistics, with dropped objects freed every 10 ms as the loader's own local instance
does (``--free-period-ms 0``: Ray's default, once a second).
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
            samples = [dataset[int(i)] for i in batch["data"]]
            return {
                "image": np.stack([s[0] for s in samples]),
                "label": np.array([s[1] for s in samples]),
            }

        order = np.random.default_rng().permutation(len(dataset))  # shuffled, as the others
        blocks = np.array_split(order, len(order) // BATCH)  # a block per batch: parallel tasks
        pipeline = ray.data.from_numpy(blocks).map_batches(
            load,
            batch_size=BATCH,
            compute=ray.data.TaskPoolStrategy(size=workers),
        )
        timed = _timed(pipeline.iter_torch_batches(batch_size=BATCH), count)
        _wait_until_idle(workers)  # its executor goes on after the last batch taken
        return timed

    return run


def _wait_until_idle(cpus: int, timeout_s: float = 60.0) -> None:
    """Until no Ray task holds a CPU (so that the next side runs alone), within a bound."""
    import gc

    import ray

    gc.collect()
    deadline = time.monotonic() + timeout_s
    while ray.available_resources().get("CPU", 0) < cpus and time.monotonic() < deadline:
        time.sleep(0.1)


def measure(
    workers: int, batches: int, runs: int, free_period_ms: int = 10, ray_data: bool = True
) -> dict[str, dict[str, list[float]]]:
    import ray

    dataset = _dataset()
    dataset[0]  # the files in the page cache for every side
    ray.init(
        address="local",
        num_cpus=workers,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
        _system_config={"free_objects_period_milliseconds": free_period_ms}
        if free_period_ms
        else None,
    )
    sides: dict[str, Callable[[Any, int], tuple[float, float]]] = {
        "flowloader, worker processes": flowloader_side("multiprocessing", workers),
        "flowloader, Ray workers": flowloader_side("ray", workers),
        "torch DataLoader, worker processes": torch_side(workers),
    }
    try:
        if not ray_data:
            raise ImportError("left out (--no-ray-data)")
        import ray.data

        sides["Ray Data, preserve_order=False"] = ray_data_side(False, workers)
        sides["Ray Data, preserve_order=True"] = ray_data_side(True, workers)
    except ImportError as error:
        print(f"Ray Data's sides are left out: {error} (pip install 'ray[data]')")
    results: dict[str, dict[str, list[float]]] = {
        name: {"first_batch_s": [], "samples_per_s": []} for name in sides
    }
    for _ in range(runs):
        for name, run in sides.items():
            to_first, rate = run(dataset, batches)
            results[name]["first_batch_s"].append(to_first)
            results[name]["samples_per_s"].append(rate)
            print(f"{name}: first batch {to_first:.2f} s, {rate:,.0f} samples/s", flush=True)
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
    parser.add_argument(
        "--free-period-ms",
        type=int,
        default=10,
        help="Ray's free_objects_period_milliseconds (0: Ray's default, 1000)",
    )
    parser.add_argument("--no-ray-data", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    import ray

    try:
        results = measure(
            args.workers, args.batches, args.runs, args.free_period_ms, not args.no_ray_data
        )
        print(table(results), flush=True)
        write_json(args.json, [results])
    finally:  # last: Ray Data's threads may end the process once Ray is shut down
        ray.shutdown()


if __name__ == "__main__":
    main()
