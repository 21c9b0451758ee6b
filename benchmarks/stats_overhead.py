"""What the always-on statistics and the trace cost: the same epochs with
``flowloader.stats.enabled`` off, on without the trace (``trace_batches = 0``) and on with it
(the default ring), interleaved. MNIST is the worst case: its batches cost ~60 us, so a fixed
cost per batch shows most; the per-sample variant also pays the per-sample transform markers.

    python -m benchmarks.stats_overhead [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import flowloader as fl
from flowloader import stats
from flowloader.vision import datasets
from flowloader.vision import transforms as T

from .common import environment, write_json

PIPELINES = {
    "MNIST batch path": lambda: T.Compose([T.ToTensor(), T.Normalize((0.1307,), (0.3081,))]),
    "MNIST per sample": lambda: T.Compose(
        [T.RandomCrop(26), T.ToTensor(), T.Normalize((0.1307,), (0.3081,))]
    ),
}


MODES = {"off": (False, 0), "stats": (True, 0), "stats and trace": (True, stats.trace_batches)}


def epoch_seconds(ds, workers: int, mode: str) -> float:
    default = stats.trace_batches
    stats.enabled, stats.trace_batches = MODES[mode]
    try:
        start = time.perf_counter()
        for _ in fl.DataLoader(ds, batch_size=64, shuffle=True, num_workers=workers):
            pass
        return time.perf_counter() - start
    finally:
        stats.enabled, stats.trace_batches = True, default


def measure(root: str, runs: int) -> list[dict]:
    if not os.path.isdir(os.path.join(root, "MNIST", "raw")):
        datasets.make_mnist(root, train_size=60000, test_size=10000)
    records = []
    for name, make in PIPELINES.items():
        ds = datasets.MNIST(root, transform=make())
        if name == "MNIST per sample":
            ds = fl.Subset(ds, range(10000))
        for workers in (0, 2):
            seconds: dict[str, list[float]] = {mode: [] for mode in MODES}
            for _ in range(runs):
                for mode, times in seconds.items():
                    times.append(epoch_seconds(ds, workers, mode))
            median = {mode: statistics.median(times) for mode, times in seconds.items()}
            records.append(
                {
                    "pipeline": name,
                    "num_workers": workers,
                    "seconds": seconds,
                    "stats_percent": (median["stats"] / median["off"] - 1) * 100,
                    "trace_percent": (median["stats and trace"] / median["stats"] - 1) * 100,
                }
            )
    return records


def section(quick: bool = False) -> str:
    root = os.path.join(tempfile.gettempdir(), "flowloader-bench-mnist")
    lines = [
        "| pipeline | num_workers | off s/epoch | stats | stats and trace | stats cost | "
        "trace cost |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in measure(root, 3 if quick else 21):
        median = {mode: statistics.median(times) for mode, times in r["seconds"].items()}
        lines.append(
            f"| {r['pipeline']} | {r['num_workers']} | {median['off']:.3f} | "
            f"{median['stats']:.3f} | {median['stats and trace']:.3f} | "
            f"{r['stats_percent']:+.1f}% | {r['trace_percent']:+.1f}% |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--data", default=os.path.join(tempfile.gettempdir(), "flowloader-bench-mnist")
    )
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    records = measure(args.data, args.runs)
    for r in records:
        print(
            f"{r['pipeline']}, num_workers={r['num_workers']}: stats "
            f"{r['stats_percent']:+.1f}%, the trace on top {r['trace_percent']:+.1f}%"
        )
    write_json(args.json, records)


if __name__ == "__main__":
    main()
