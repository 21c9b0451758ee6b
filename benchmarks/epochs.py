"""Epoch after epoch on one loader: flowloader's DataLoader with thread workers and with worker
processes, each with persistent_workers False and True, side by side with torch's DataLoader
(processes, both settings) on the same dataset, batch size and worker count. Each loader is
made once and reads one epoch untimed; then whole epochs are timed one at a time, the loaders
taking turns in rotating order. Without persistent workers each epoch starts its workers
again, and what they had made (a thread's batch blocks, a process's segments) goes with them
unless the loader keeps it.

Pipelines: the ImageNet training (float32) or validation (uint8) pipeline over flowloader
bench's built-in ImageFolder (2,000 JPEGs of 500x375, batch 64).

    python -m benchmarks.epochs [--workers 2] [--runs 5] [--pipeline imagenet-train] [--json F]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from .common import environment, loaders, median, rotated, write_json

PIPELINES = {"imagenet-train": False, "imagenet-val uint8": True}  # name -> uint8


def _dataset(pipeline: str) -> Any:
    from flowloader.cli import pipelines, sample_data
    from flowloader.vision import datasets, transforms

    root = sample_data.builtin("imagenet-like")
    name = pipeline.split()[0]
    return pipelines.dataset(name, root, datasets, transforms, PIPELINES[pipeline])


def _loaders(ds: Any, workers: int) -> dict[str, Any]:
    """name -> a loader over ``ds``: flowloader threads and processes, torch's processes, each
    with and without persistent workers."""
    made = {}
    for library, make in loaders().items():
        methods = ("thread", "multiprocessing") if library == "flowloader" else (None,)
        for method in methods:
            kind = f"{library} {'threads' if method == 'thread' else 'processes'}"
            options = {} if method is None else {"worker_method": method}
            for persistent in (False, True):
                made[f"{kind}, persistent_workers={persistent}"] = make(
                    ds,
                    batch_size=64,
                    shuffle=True,
                    num_workers=workers,
                    persistent_workers=persistent,
                    **options,
                )
    return made


def _epoch(loader: Any) -> float:
    """Samples/s over one whole epoch, its workers' start included."""
    start, samples = time.perf_counter(), 0
    for batch in loader:
        samples += len(batch[1])
    return samples / (time.perf_counter() - start)


def measure(pipeline: str, workers: int, runs: int) -> dict[str, Any]:
    made = _loaders(_dataset(pipeline), workers)
    for loader in made.values():
        _epoch(loader)  # start-up of the first epoch, the page cache
    names = list(made)
    rates: dict[str, list[float]] = {name: [] for name in names}
    for k in range(runs):
        for name in rotated(names, k):
            rates[name].append(_epoch(made[name]))
    return {"pipeline": pipeline, "workers": workers, "samples_per_s": rates}


def table(record: dict[str, Any]) -> str:
    rates = {name: median(values) for name, values in record["samples_per_s"].items()}
    lines = [
        "| loader | persistent_workers=False | persistent_workers=True | False / True | "
        "against torch, False | against torch, True |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    kinds = sorted({name.split(",")[0] for name in rates}, key=lambda k: k.startswith("torch"))
    for kind in kinds:
        off, on = (
            rates[f"{kind}, persistent_workers=False"],
            rates[f"{kind}, persistent_workers=True"],
        )
        torch_off = rates.get("torch processes, persistent_workers=False")
        torch_on = rates.get("torch processes, persistent_workers=True")
        against = (
            f"{off / torch_off:.2f}x | {on / torch_on:.2f}x" if torch_off and torch_on else "- | -"
        )
        lines.append(f"| {kind} | {off:,.0f} | {on:,.0f} | {off / on:.2f}x | {against} |")
    return "\n".join(lines)


def section(quick: bool = False) -> str:
    return table(measure("imagenet-train", workers=2, runs=1 if quick else 5))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pipeline", choices=list(PIPELINES), default="imagenet-train")
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    record = measure(args.pipeline, args.workers, args.runs)
    print(f"{args.pipeline}, batch 64, num_workers={args.workers}: samples/s over whole epochs")
    print(table(record))
    write_json(args.json, [record])


if __name__ == "__main__":
    main()
