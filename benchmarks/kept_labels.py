"""A training loop that keeps every batch's labels (for its metrics), against one that keeps
nothing (issue 38): how much shared memory the kept labels hold, and what they cost in
samples/s, for flowloader and torch's DataLoader, 2 worker processes, ImageNet-shaped batches
of 64 (3x224x224 float32, 38.5 MB) made in the workers without decoding.

    python -m benchmarks.kept_labels [--samples 3200] [--runs 3] [--json F]
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from typing import Any

import numpy as np

from .common import alternate, environment, loaders, median, write_json

BATCH = 64
WORKERS = 2


class Images:
    """ImageNet-shaped samples, filled in the worker (no file, no decode)."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> tuple[np.ndarray, int]:
        return np.full((3, 224, 224), i % 251, np.float32), i


def shm_used(path: str = "/dev/shm") -> int:
    stats = os.statvfs(path)
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize


def epoch(loader_class: Any, samples: int, keep: bool) -> tuple[float, int]:
    """(samples/s, bytes of /dev/shm grown by the end of the epoch, before letting go)."""
    loader = loader_class(Images(samples), batch_size=BATCH, num_workers=WORKERS)
    gc.collect()
    before = shm_used()
    kept = []
    start = time.perf_counter()
    for _, labels in loader:
        if keep:
            kept.append(labels)
    rate = samples / (time.perf_counter() - start)
    grown = shm_used() - before
    del kept, loader
    gc.collect()
    return rate, grown


def run(samples: int, runs: int) -> dict[str, Any]:
    classes = loaders()
    grown: dict[str, list[int]] = {}

    def measure(name: str, keep: bool) -> Any:
        def one() -> float:
            rate, bytes_grown = epoch(classes[name], samples, keep)
            grown.setdefault(f"{name} {'keeps' if keep else 'keeps nothing'}", []).append(
                bytes_grown
            )
            return rate

        return one

    rates = alternate(
        runs,
        {
            f"{name} {'keeps' if keep else 'keeps nothing'}": measure(name, keep)
            for name in classes
            for keep in (False, True)
        },
    )
    return {"samples": samples, "rates": rates, "grown": grown}


def table(record: dict[str, Any]) -> str:
    lines = [
        f"{record['samples']:,} samples, batches of {BATCH}, {WORKERS} worker processes; medians "
        "of interleaved epochs.",
        "",
        "| loader, loop | samples/s | /dev/shm grown by the epoch's end, MB | runs (samples/s) |",
        "| --- | ---: | ---: | --- |",
    ]
    for name, rates in record["rates"].items():
        grown = median(record["grown"][name]) / 1e6
        shown = ", ".join(f"{r:,.0f}" for r in rates)
        lines.append(f"| {name} | {median(rates):,.0f} | {grown:,.1f} | {shown} |")
    return "\n".join(lines)


def section(quick: bool = False) -> str:
    return table(run(640 if quick else 3200, 1 if quick else 3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=3200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    record = run(args.samples, args.runs)
    print(table(record))
    write_json(args.json, [record])


if __name__ == "__main__":
    main()
