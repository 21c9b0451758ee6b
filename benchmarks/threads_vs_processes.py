"""Threads or processes for the ImageNet pipelines? Pillow decodes and resizes with the GIL
released, and NumPy's passes release it too, so a pool of loader threads in the training
process might match worker processes without any transport. Measured here before building a
thread-based worker mode: a thread pool running the same ImageFolder dataset (each thread loads
and stacks whole batches, 4 batches in flight, in order), flowloader's worker processes and
torch's DataLoader, all with batch 64 on the same JPEGs.

    python -m benchmarks.threads_vs_processes [--batches 25] [--runs 3]
"""

from __future__ import annotations

import argparse
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .common import environment, median, write_json
from .imagenet import _modules
from .imagenet import measure as imagenet_measure

BATCH = 64
PIPELINES = [("imagenet-train", False), ("imagenet-val", False), ("imagenet-train", True)]


def _batches_per_s(batches: Any, count: int) -> float:
    """Samples/s over ``count`` batches after the first (start-up excluded)."""
    next(batches)
    start = time.perf_counter()
    for _ in range(count):
        next(batches)
    return count * BATCH / (time.perf_counter() - start)


def loader_rate(library: str, pipeline: str, root: str, batches: int, uint8: bool) -> float:
    """Samples/s of ``library``'s DataLoader with 2 workers (the ImageNet suite's measurement)."""
    return imagenet_measure(library, pipeline, root, 2, batches, uint8)[0]


def thread_pool_rate(ds: Any, threads: int, count: int) -> float:
    order = np.random.default_rng(0).permutation(len(ds))

    def load(k: int) -> tuple[np.ndarray, np.ndarray]:
        items = [ds[int(i)] for i in order[k * BATCH : (k + 1) * BATCH]]
        return np.stack([x for x, _ in items]), np.array([y for _, y in items])

    def batches(pool: ThreadPoolExecutor) -> Any:
        pending: deque = deque(pool.submit(load, k) for k in range(4))
        k = 4
        while pending:
            yield pending.popleft().result()
            pending.append(pool.submit(load, k))
            k += 1

    with ThreadPoolExecutor(threads) as pool:
        generator = batches(pool)
        try:
            return _batches_per_s(generator, count)
        finally:
            generator.close()


def measure(batches: int, runs: int) -> list[dict]:
    import importlib.util

    from flowloader.cli import pipelines, sample_data

    root = sample_data.builtin("imagenet-like")
    libraries = ["flowloader"]
    if importlib.util.find_spec("torchvision") is not None:
        libraries.append("torch")
    records = []
    for pipeline, uint8 in PIPELINES:
        _, datasets, transforms = _modules("flowloader")
        ds = pipelines.dataset(pipeline, root, datasets, transforms, uint8)
        results: dict[str, list[float]] = {
            "flowloader, 2 worker processes": [],
            "2 loader threads": [],
            "3 loader threads": [],
        }
        if "torch" in libraries:
            results["torch, 2 worker processes"] = []
        for _ in range(runs):
            results["flowloader, 2 worker processes"].append(
                loader_rate("flowloader", pipeline, root, batches, uint8)
            )
            results["2 loader threads"].append(thread_pool_rate(ds, 2, batches))
            results["3 loader threads"].append(thread_pool_rate(ds, 3, batches))
            if "torch" in libraries:
                results["torch, 2 worker processes"].append(
                    loader_rate("torch", pipeline, root, batches, uint8)
                )
        name = pipeline + (" (uint8 output)" if uint8 else "")
        records.append({"pipeline": name, "runs": results})
    return records


def section(quick: bool = False) -> str:
    records = measure(batches=10 if quick else 25, runs=1 if quick else 3)
    names = list(records[0]["runs"])
    lines = [
        "| pipeline | " + " | ".join(f"{n} samples/s" for n in names) + " |",
        "| --- |" + " ---: |" * len(names),
    ]
    for r in records:
        medians = [median(r["runs"][n]) for n in names]
        lines.append(f"| {r['pipeline']} | " + " | ".join(f"{m:,.0f}" for m in medians) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=25)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    records = measure(args.batches, args.runs)
    for r in records:
        shown = ", ".join(f"{n}: {median(v):,.0f}/s" for n, v in r["runs"].items())
        print(f"{r['pipeline']}: {shown}")
    write_json(args.json, records)


if __name__ == "__main__":
    main()
