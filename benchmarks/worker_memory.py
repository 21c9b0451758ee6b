"""Worker memory: do forked workers copy the dataset's sample list as they read it?

Hypothesis (pytorch#13246): a Python list of (path, class) tuples is copied page by page into
every worker, because reading an object writes its reference count. DatasetFolder's NumPy
sample table has no per-sample objects, so the pages stay shared.

Two million generated entries (no files), a dataset that only looks its entries up, batch 256,
num_workers=2, one epoch; summed PSS of the main process and the workers, from
/proc/<pid>/smaps_rollup, after the first batch and before the last.

    python -m benchmarks.worker_memory [--entries 2000000] [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys

from .common import environment, write_json

ENTRY = "/datasets/imagenet/train/n{cls:08d}/n{cls:08d}_{i:07d}.JPEG"


def entries(count: int):
    return ((ENTRY.format(cls=i % 1000, i=i), i % 1000) for i in range(count))


class Lookup:
    """Sample i: the length of its path and its class; touches only the sample storage."""

    def __init__(self, samples) -> None:
        self.samples = samples

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int):
        path, target = self.samples[i]
        return len(path), target


def pss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def total_pss(iterator) -> int:
    transport = getattr(iterator, "_transport", None)  # ours; torch's keeps a list of processes
    if transport is None:
        processes = iterator._workers
    else:  # thread workers have no process of their own
        group = getattr(transport, "group", None)
        processes = group.processes if group is not None else []
    return sum(pss_bytes(pid) for pid in [os.getpid(), *(p.pid for p in processes)])


def epoch_growth(loader_class, samples) -> tuple[int, int]:
    loader = loader_class(Lookup(samples), batch_size=256, num_workers=2)
    iterator = iter(loader)
    total = len(loader)
    next(iterator)
    start = end = total_pss(iterator)
    for index, _ in enumerate(iterator, start=2):
        if index == total:
            end = total_pss(iterator)
    del iterator
    return start, end


RUNS = {
    "flowloader + NumPy sample table (DatasetFolder)": ("flowloader", "table"),
    "flowloader + Python list": ("flowloader", "list"),
    "torch + Python list (torchvision's storage)": ("torch", "list"),
    "torch + NumPy sample table": ("torch", "table"),
}


def measure(name: str, count: int) -> dict:
    """One configuration; run in a fresh process so that runs do not disturb each other
    (importing torch alone changes what the workers touch)."""
    library, storage = RUNS[name]
    if library == "torch":
        from torch.utils.data import DataLoader
    else:
        from flowloader import DataLoader
    from flowloader.vision.datasets.folder import SampleTable

    samples = SampleTable(entries(count)) if storage == "table" else list(entries(count))
    start, end = epoch_growth(DataLoader, samples)
    return {
        "run": name,
        "start_bytes": start,
        "end_bytes": end,
        "growth_percent": (end - start) / start * 100,
    }


def measure_all(count: int) -> list[dict]:
    """Every configuration, each in a fresh process (torch's only where torch is installed)."""
    records = []
    for name, (library, _) in RUNS.items():
        if library == "torch" and importlib.util.find_spec("torch") is None:
            continue
        command = [sys.executable, "-m", "benchmarks.worker_memory", "--one", name]
        command += ["--entries", str(count)]
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        records.append(json.loads(done.stdout))
    return records


def section(quick: bool = False) -> str:
    count = 200_000 if quick else 2_000_000
    lines = [
        f"{count:,} entries, batch 256, num_workers=2, summed PSS over one epoch:",
        "",
        "| configuration | PSS at start | PSS at end | growth |",
        "| --- | ---: | ---: | ---: |",
    ]
    for record in measure_all(count):
        lines.append(
            f"| {record['run']} | {record['start_bytes'] / 2**20:.0f} MiB | "
            f"{record['end_bytes'] / 2**20:.0f} MiB | {record['growth_percent']:+.1f}% |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=2_000_000)
    parser.add_argument("--json")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.entries)))
        return
    print(environment())
    print(f"\n{args.entries:,} entries, batch 256, num_workers=2: summed PSS over one epoch")
    records = measure_all(args.entries)
    for record in records:
        start, end = record["start_bytes"] / 2**20, record["end_bytes"] / 2**20
        growth = record["growth_percent"]
        print(f"  {record['run']:<48} {start:6.0f} MiB -> {end:6.0f} MiB  ({growth:+.1f}%)")
    write_json(args.json, records)


if __name__ == "__main__":
    main()
