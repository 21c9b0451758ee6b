"""Shared helpers for the side-by-side benchmarks: timing, medians, environment, reporting."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def environment() -> dict[str, Any]:
    """What a figure was measured on."""
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpus": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "machine": platform.machine(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
    except ImportError:
        info["torch"] = None
    return info


def loaders() -> dict[str, Any]:
    """The DataLoader classes to compare: flowloader's, and torch's when it is installed."""
    import flowloader

    found = {"flowloader": flowloader.DataLoader}
    try:
        import torch.utils.data

        found["torch"] = torch.utils.data.DataLoader
    except ImportError:
        print("torch is not installed: measuring flowloader alone", file=sys.stderr)
    return found


def rotated(items: list[Any], number: int) -> list[Any]:
    """``items`` in round ``number``'s order: each round starts one further on, so that no
    item always runs first, or always right after the same one."""
    shift = number % len(items)
    return items[shift:] + items[:shift]


def alternate(runs: int, measure: dict[str, Callable[[], float]]) -> dict[str, list[float]]:
    """Run each measurement ``runs`` times, interleaved, so drift hits both sides alike."""
    results: dict[str, list[float]] = {name: [] for name in measure}
    for _ in range(runs):
        for name, fn in measure.items():
            results[name].append(fn())
    return results


def alternate_epochs(
    epochs: dict[str, Callable[[str, int], float]], root: str, workers: int, runs: int
) -> dict[str, list[float]]:
    """Each loader's ``epoch(root, workers)`` samples/s over ``runs`` interleaved runs."""
    return alternate(
        runs, {name: (lambda e=epoch: e(root, workers)) for name, epoch in epochs.items()}
    )


def resident_bytes(pid: int) -> int:
    """A process's resident memory (VmRSS), in bytes."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (a loader's workers)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            if parent == pid:
                found.append(int(name))
    return found


def median(values: list[float]) -> float:
    return statistics.median(values)


def report(title: str, unit: str, results: dict[str, list[float]], higher_is_better: bool) -> dict:
    """Print a small table with medians and the flowloader/torch ratio; return a record."""
    medians = {name: median(values) for name, values in results.items()}
    print(f"\n{title}")
    for name, values in results.items():
        shown = ", ".join(f"{v:.3g}" for v in values)
        print(f"  {name:<11} median {medians[name]:.4g} {unit}   (runs: {shown})")
    record: dict[str, Any] = {"title": title, "unit": unit, "medians": medians, "runs": results}
    if "torch" in medians and medians["torch"] > 0:
        ratio = medians["flowloader"] / medians["torch"]
        if not higher_is_better:
            ratio = 1 / ratio
        record["speedup_vs_torch"] = ratio
        better = "higher" if higher_is_better else "lower"
        print(f"  flowloader is {ratio:.2f}x torch ({better} is better)")
        if "flowloader threads" in medians:
            threads = medians["flowloader threads"] / medians["torch"]
            threads = threads if higher_is_better else 1 / threads
            record["threads_speedup_vs_torch"] = threads
            print(f"  flowloader with thread workers is {threads:.2f}x torch")
    return record


def side_by_side(
    title: str, unit: str, runs: int, measure: Callable[[Any], float], higher_is_better: bool
) -> dict:
    """``measure(loader_class)`` for every loader, interleaved ``runs`` times, then reported."""
    measures = {name: (lambda cls=cls: measure(cls)) for name, cls in loaders().items()}
    return report(title, unit, alternate(runs, measures), higher_is_better)


def markdown(record: dict, value_format: str = "{:.3g}") -> str:
    """A side_by_side record as a Markdown table with its ratio."""
    lines = ["| loader | median | runs |", "| --- | ---: | --- |"]
    for name, values in record["runs"].items():
        shown = ", ".join(value_format.format(v) for v in values)
        value = value_format.format(record["medians"][name])
        lines.append(f"| {name} | {value} {record['unit']} | {shown} |")
    if "speedup_vs_torch" in record:
        lines.append(f"| **ratio** | **{record['speedup_vs_torch']:.2f}x** | |")
    return "\n".join(lines)


def write_json(path: str | None, records: list[dict]) -> None:
    if path:
        with open(path, "w") as out:
            json.dump({"environment": environment(), "results": records}, out, indent=2)


class Stopwatch:
    def __enter__(self) -> Stopwatch:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start


def throughput_record(
    pipeline: str, workers: int, results: dict[str, list[tuple[float, float]]]
) -> dict[str, Any]:
    """Medians of (samples/s, CPU s per 1,000 samples) runs per library, and their ratio."""
    record: dict[str, Any] = {"pipeline": pipeline, "num_workers": workers, "runs": results}
    for library, values in results.items():
        record[f"{library}_samples_per_s"] = median([v[0] for v in values])
        record[f"{library}_cpu_s_per_1000"] = median([v[1] for v in values])
    record["ratio"] = record["flowloader_samples_per_s"] / record["torch_samples_per_s"]
    return record


def throughput_table(records: list[dict], first_column: str = "pipeline") -> str:
    """A Markdown table of side-by-side samples/s and CPU seconds per 1,000 samples."""
    rows = "\n".join(
        f"| {r['pipeline']} | {r['num_workers']} | {r['flowloader_samples_per_s']:,.0f} | "
        f"{r['torch_samples_per_s']:,.0f} | **{r['ratio']:.2f}x** | "
        f"{r['flowloader_cpu_s_per_1000']:.2f} | {r['torch_cpu_s_per_1000']:.2f} |"
        for r in records
    )
    return (
        f"| {first_column} | num_workers | flowloader samples/s | torch samples/s | ratio | "
        "flowloader CPU s / 1000 | torch CPU s / 1000 |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n" + rows
    )


def print_throughput(records: list[dict]) -> None:
    """One line per record of :func:`throughput_table`'s figures."""
    for r in records:
        print(
            f"{r['pipeline']}, num_workers={r['num_workers']}: "
            f"flowloader {r['flowloader_samples_per_s']:,.0f}/s "
            f"({r['flowloader_cpu_s_per_1000']:.2f} CPU s per 1000), "
            f"torch {r['torch_samples_per_s']:,.0f}/s ({r['torch_cpu_s_per_1000']:.2f}): "
            f"{r['ratio']:.2f}x"
        )


def epochs_table(measure: Callable[[int, int], dict[str, list[float]]], runs: int) -> str:
    """A Markdown table of median samples/s at 0 and 2 workers; ``measure(workers, runs)``
    returns each loader's samples/s over ``runs`` interleaved epochs."""
    lines = [
        "| num_workers | flowloader samples/s | torch samples/s | ratio |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for workers in (0, 2):
        results = measure(workers, runs)
        theirs = median(results["torch"])
        for side, label in (
            ("flowloader", f"{workers}"),
            ("flowloader threads", f"{workers}, threads"),
            ("drop-in", f"{workers}, drop-in (flowloader.utils.data)"),
        ):
            if side in results:
                ours = median(results[side])
                lines.append(
                    f"| {label} | {ours:,.0f} | {theirs:,.0f} | **{ours / theirs:.1f}x** |"
                )
    return "\n".join(lines)
