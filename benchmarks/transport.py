"""Transport benchmark: how fast ready-made batches move from workers to the training loop.

Hypothesis: with the sample already in memory, a loader's throughput is its transport cost.
The dataset returns a ready 3x224x224 float32 array and an int label; batch 64 (38.5 MB),
num_workers=2, fork. The consumer does not touch the data (both loaders hand out shared
memory without copying it). GB/s is measured from the first batch to the last, so worker
start-up is excluded; a single-process NumPy copy of the same bytes is the reference.

    python -m benchmarks.transport [--batches 200] [--runs 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from .common import environment, markdown, side_by_side, write_json

BATCH = 64
SHAPE = (3, 224, 224)


class ReadyImages:
    """Sample i: one pre-made float32 image and the label i."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.image = np.random.default_rng(0).random(SHAPE, dtype=np.float32)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int):
        return self.image, i


def measure_gbps(loader_class, batches: int, workers: int) -> float:
    loader = loader_class(ReadyImages(BATCH * batches), batch_size=BATCH, num_workers=workers)
    iterator = iter(loader)
    next(iterator)
    start = time.perf_counter()
    moved = 0
    for images, _ in iterator:
        moved += images.nbytes if isinstance(images, np.ndarray) else images.numel() * 4
    elapsed = time.perf_counter() - start
    del iterator
    return moved / elapsed / 1e9


def memcpy_gbps(repeats: int = 20) -> float:
    source = np.random.default_rng(0).random((BATCH, *SHAPE), dtype=np.float32)
    target = np.empty_like(source)
    np.copyto(target, source)
    start = time.perf_counter()
    for _ in range(repeats):
        np.copyto(target, source)
    return source.nbytes * repeats / (time.perf_counter() - start) / 1e9


def section(quick: bool = False) -> str:
    batches = 40 if quick else 200
    record = side_by_side(
        f"transport, {batches} batches",
        "GB/s",
        1 if quick else 3,
        lambda cls: measure_gbps(cls, batches, 2),
        higher_is_better=True,
    )
    return markdown(record, "{:.2f}") + (
        f"\n\nReference: a single-process NumPy copy of one batch: {memcpy_gbps():.1f} GB/s."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    record = side_by_side(
        f"transport: {args.batches} batches of {BATCH}x{SHAPE} float32, num_workers={args.workers}",
        "GB/s",
        args.runs,
        lambda cls: measure_gbps(cls, args.batches, args.workers),
        higher_is_better=True,
    )
    record["numpy_memcpy_gbps"] = memcpy_gbps()
    reference = record["numpy_memcpy_gbps"]
    print(f"  reference: single-process NumPy copy of one batch {reference:.1f} GB/s")
    write_json(args.json, [record])


if __name__ == "__main__":
    main()
