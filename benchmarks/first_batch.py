"""Time from ``iter(loader)`` to the first batch, on an ImageNet-like training pipeline.

Hypothesis: start-up is worker creation plus one batch of decoding; a loader should add
little to that. JPEGs of 500x375, decode + random resized crop 224 + flip + normalise
(PIL + NumPy, the same dataset code for both loaders), batch 64, num_workers=2, fork.

    python -m benchmarks.first_batch [--runs 7] [--images 256] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from .common import environment, markdown, side_by_side, write_json
from .imagenet_like import JpegTrainDataset, make_jpeg_folder


def seconds_to_first_batch(loader_class, dataset, workers: int) -> float:
    loader = loader_class(dataset, batch_size=64, shuffle=True, num_workers=workers)
    start = time.perf_counter()
    iterator = iter(loader)
    next(iterator)
    elapsed = time.perf_counter() - start
    del iterator
    return elapsed


def section(quick: bool = False) -> str:
    dataset = JpegTrainDataset(
        make_jpeg_folder(os.path.join(tempfile.gettempdir(), "flowloader-bench-jpeg"), 256)
    )
    dataset[0]
    record = side_by_side(
        "time to first batch",
        "s",
        3 if quick else 7,
        lambda cls: seconds_to_first_batch(cls, dataset, 2),
        higher_is_better=False,
    )
    return markdown(record, "{:.3f}") + "\n\n(ratio: how many times faster flowloader is)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--data", default=os.path.join(tempfile.gettempdir(), "flowloader-bench-jpeg")
    )
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    dataset = JpegTrainDataset(make_jpeg_folder(args.data, args.images))
    dataset[0]  # warm the page cache so both sides read from memory
    record = side_by_side(
        f"time to first batch: ImageNet-like train pipeline, batch 64, num_workers={args.workers}",
        "s",
        args.runs,
        lambda cls: seconds_to_first_batch(cls, dataset, args.workers),
        higher_is_better=False,
    )
    write_json(args.json, [record])


if __name__ == "__main__":
    main()
