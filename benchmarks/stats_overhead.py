"""What the always-on statistics cost: the same epochs with ``flowloader.stats.enabled`` on
and off, interleaved. MNIST is the worst case: its batches cost ~60 us, so a fixed cost per
batch shows most; the per-sample variant also pays the per-sample transform markers.

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


def epoch_seconds(ds, workers: int, enabled: bool) -> float:
    stats.enabled = enabled
    try:
        start = time.perf_counter()
        for _ in fl.DataLoader(ds, batch_size=64, shuffle=True, num_workers=workers):
            pass
        return time.perf_counter() - start
    finally:
        stats.enabled = True


def measure(root: str, runs: int) -> list[dict]:
    if not os.path.isdir(os.path.join(root, "MNIST", "raw")):
        datasets.make_mnist(root, train_size=60000, test_size=10000)
    records = []
    for name, make in PIPELINES.items():
        ds = datasets.MNIST(root, transform=make())
        if name == "MNIST per sample":
            ds = fl.Subset(ds, range(10000))
        for workers in (0, 2):
            on, off = [], []
            for _ in range(runs):
                off.append(epoch_seconds(ds, workers, False))
                on.append(epoch_seconds(ds, workers, True))
            overhead = (statistics.median(on) / statistics.median(off) - 1) * 100
            records.append(
                {
                    "pipeline": name,
                    "num_workers": workers,
                    "on_s": on,
                    "off_s": off,
                    "overhead_percent": overhead,
                }
            )
    return records


def section(quick: bool = False) -> str:
    root = os.path.join(tempfile.gettempdir(), "flowloader-bench-mnist")
    lines = [
        "| pipeline | num_workers | stats on s/epoch | off s/epoch | overhead |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for r in measure(root, 3 if quick else 21):
        lines.append(
            f"| {r['pipeline']} | {r['num_workers']} | {statistics.median(r['on_s']):.3f} | "
            f"{statistics.median(r['off_s']):.3f} | {r['overhead_percent']:+.1f}% |"
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
        on, off = statistics.median(r["on_s"]), statistics.median(r["off_s"])
        print(
            f"{r['pipeline']}, num_workers={r['num_workers']}: stats on {on:.3f}s, "
            f"off {off:.3f}s per epoch: {r['overhead_percent']:+.1f}%"
        )
    write_json(args.json, records)


if __name__ == "__main__":
    main()
