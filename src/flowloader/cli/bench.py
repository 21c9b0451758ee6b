"""``flowloader bench``: run the seed's pipelines at a few worker counts and report where the
time goes (optionally side by side with torch.utils.data + torchvision)."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from dataclasses import dataclass
from typing import Any

import flowloader
from flowloader.stats import LoaderStats
from flowloader.vision import datasets as fl_datasets
from flowloader.vision import image_backend
from flowloader.vision import transforms as fl_transforms

from . import pipelines, sample_data
from .progress import Progress


class UsageError(Exception):
    """A problem with the command line or the data; reported in one line, exit code 2."""


def require_directory(path: str) -> None:
    """Raise a UsageError unless ``path`` is a directory (the commands' data roots)."""
    if not os.path.exists(path):
        raise UsageError(f"{path}: no such directory")
    if not os.path.isdir(path):
        raise UsageError(f"{path}: not a directory")


@dataclass
class Options:
    root: str | None
    pipelines: list[str]
    batch_size: int
    workers: list[int | str]
    seconds: float | None
    epochs: int | None
    json: bool
    compare: str | None
    plot: str | None


def roots_for(options: Options) -> dict[str, str]:
    """pipeline -> dataset root (the cached built-in data when no PATH was given)."""
    if options.root is None:  # only the built-in data the chosen pipelines read is made
        kinds = {p: "mnist" if p == "mnist" else "imagenet-like" for p in options.pipelines}
        made = {kind: sample_data.builtin(kind) for kind in dict.fromkeys(kinds.values())}
        return {p: made[kind] for p, kind in kinds.items()}
    require_directory(options.root)
    kind = pipelines.kind_of(options.root)
    for pipeline in options.pipelines:
        if (pipeline == "mnist") != (kind == "mnist"):
            raise UsageError(
                f"{options.root} holds {'an MNIST' if kind == 'mnist' else 'an ImageFolder'} "
                f"dataset; pipeline {pipeline!r} does not fit it"
            )
    return dict.fromkeys(options.pipelines, options.root)


def _torch_modules() -> tuple[Any, Any, Any]:
    try:
        import torch.utils.data
        from torchvision import datasets, transforms
    except Exception as error:  # ImportError, or torchvision failing to load beside torch
        raise UsageError(
            f"--compare torch needs torch and torchvision importable ({error})"
        ) from None
    return torch.utils.data.DataLoader, datasets, transforms


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _batch_nbytes(batch: Any) -> int:
    images = batch[0]
    return (
        int(images.nbytes)
        if hasattr(images, "nbytes")
        else int(images.numel() * images.element_size())
    )


def run_once(
    library: str, pipeline: str, root: str, workers: int | str, options: Options, modules: Any
) -> dict[str, Any]:
    """One measured run; returns its record."""
    loader_class, datasets, T = modules
    ds = pipelines.dataset(pipeline, root, datasets, T)
    loader = loader_class(
        ds, batch_size=options.batch_size, shuffle=pipeline != "imagenet-val", num_workers=workers
    )
    total = len(loader) * options.epochs if options.epochs else None
    progress = Progress(f"{library} {pipeline} workers={workers}", total, "batches")
    cpu_before, children_before = _self_cpu_s(), _children_cpu_s()
    started = time.perf_counter()
    samples = batches = nbytes = 0
    first_batch_s = None
    epochs_stats = []
    marks: list[tuple[float, int]] = []  # (seconds in, samples so far) at each batch
    for _ in range(options.epochs or 1_000_000):
        iterator = iter(loader)
        for batch in iterator:
            if first_batch_s is None:
                first_batch_s = time.perf_counter() - started
            batches += 1
            samples += len(batch[1])
            nbytes += _batch_nbytes(batch)
            elapsed = time.perf_counter() - started
            marks.append((elapsed, samples))
            progress.update(batches, f"{samples / elapsed:,.0f} samples/s")
            if options.seconds is not None and elapsed >= options.seconds:
                break
        if hasattr(iterator, "stats"):
            epochs_stats.append(iterator.stats())
        del iterator
        if options.seconds is not None and time.perf_counter() - started >= options.seconds:
            break
    elapsed = time.perf_counter() - started
    progress.update(batches, f"{samples / elapsed:,.0f} samples/s")  # the table's figure
    progress.close()
    stats = LoaderStats.merged(epochs_stats) if epochs_stats else None
    cpu = (_self_cpu_s() - cpu_before) + (_children_cpu_s() - children_before)
    record: dict[str, Any] = {
        "library": library,
        "pipeline": pipeline,
        "dataset": root,
        "num_workers": workers,
        "batch_size": options.batch_size,
        "batches": batches,
        "samples": samples,
        "seconds": elapsed,
        "samples_per_s": samples / elapsed,
        "batches_per_s": batches / elapsed,
        "mb_per_s": nbytes / elapsed / 1e6,
        "first_batch_s": first_batch_s,
        "cores_used": stats.cores_used if stats is not None else cpu / elapsed,
        "part_samples_per_s": part_rates(marks),
    }
    if stats is not None:
        per_batch = 1000 / max(stats.batches, 1)
        record["stage_ms_per_batch"] = {k: v * per_batch for k, v in stats.stage_s.items()}
        record["data_wait_fraction"] = stats.data_wait_fraction
        record["worker_busy_fraction"] = stats.worker_busy_fraction
        record["verdict"] = stats.verdict()
        if stats.tuning:
            record["tuning"] = stats.tuning
    return record


# A run's rate is also measured over this many equal parts of it, after its first batch (the
# workers' start-up): their spread is the run's noise, which a difference between two runs must
# exceed to be reported as one.
PARTS = 3


def part_rates(marks: list[tuple[float, int]], parts: int = PARTS) -> list[float]:
    """Samples/s over ``parts`` equal spans of time from the first batch to the last, from
    (seconds in, samples so far) at each batch; fewer where the run has too few batches."""
    if len(marks) < parts + 1:
        return []
    (start, before), (end, total) = marks[0], marks[-1]
    span = (end - start) / parts
    if span <= 0:
        return []
    rates, k, counted = [], 0, before
    for part in range(1, parts + 1):
        edge = start + part * span
        while k < len(marks) - 1 and marks[k + 1][0] <= edge:
            k += 1
        now = total if part == parts else marks[k][1]
        rates.append((now - counted) / span)
        counted = now
    return rates


def spread(record: dict[str, Any]) -> float:
    """A run's noise: the spread of its parts' rates over their mean (0: not measured)."""
    rates = record.get("part_samples_per_s") or []
    mean = sum(rates) / len(rates) if rates else 0.0
    return (max(rates) - min(rates)) / mean if mean > 0 else 0.0


STAGE_COLUMNS = ("read", "transform", "collate", "transport", "wait")
FOOTNOTE = (
    "ms per batch: read = dataset time outside transforms (file read; decode on the Pillow path:",
    "the native kernel decodes inside transform); wait = time the training loop spent inside",
    "next(). This loop does no work, so it always waits: in real training, iterator.stats() tells",
    "whether the loop is input-bound.",
)


def format_table(records: list[dict[str, Any]]) -> list[str]:
    """The lines of the table that ``flowloader bench`` prints for ``records``. The
    ``vs torch`` column is there only when torch ran (``--compare torch``)."""
    torch_rate = {
        (r["pipeline"], r["num_workers"]): r["samples_per_s"]
        for r in records
        if r["library"] == "torch"
    }
    header = _header(compared=bool(torch_rate))
    lines = [f"JPEG decoding: {records[0]['image_backend']}", "", header, "-" * len(header)]
    lines += [_row(r, torch_rate) for r in records]
    lines += ["", *FOOTNOTE, ""]
    for pipeline in dict.fromkeys(r["pipeline"] for r in records):
        ours = [r for r in records if r["pipeline"] == pipeline and r["library"] == "flowloader"]
        fixed = [r for r in ours if r["num_workers"] != "auto"]
        if fixed:
            best = max(fixed, key=lambda r: r["samples_per_s"])
            lines.append(
                f"{pipeline}: fastest at num_workers={best['num_workers']}, "
                f"{best['samples_per_s']:,.0f} samples/s on {best['cores_used']:.2f} cores"
            )
        lines += [_auto_line(pipeline, r, fixed) for r in ours if r["num_workers"] == "auto"]
    return lines


def _auto_line(pipeline: str, auto: dict[str, Any], fixed: list[dict[str, Any]]) -> str:
    """What num_workers="auto" chose (its last decision and why) and its rate against the
    best fixed count measured: a ratio only where the difference exceeds the noise of both
    runs (the spread of their parts' rates), else "within noise"."""
    decisions = auto.get("tuning") or []
    chose = decisions[-1] if decisions else None
    what = f"chose {chose['num_workers']} workers ({chose['reason']})" if chose else "chose nothing"
    line = f"{pipeline}: auto {what}; {auto['samples_per_s']:,.0f} samples/s"
    if fixed:
        best = max(fixed, key=lambda r: r["samples_per_s"])
        ratio = auto["samples_per_s"] / best["samples_per_s"]
        noise = max(spread(auto), spread(best))
        if abs(ratio - 1) > noise and noise > 0:
            line += f", {ratio:.2f}x the best fixed count"
        else:
            measured = f"runs' parts spread {100 * noise:.0f}%" if noise else "no spread measured"
            line += f", within noise of the best fixed count ({ratio:.2f}x; {measured})"
    return line


def _header(compared: bool) -> str:
    return (
        f"{'pipeline':<15}{'workers':>8}{'samples/s':>11}{'batches/s':>10}{'MB/s':>8}"
        f"{'1st batch':>10}{'cores':>7}  ms per batch: "
        + " ".join(f"{c:>9}" for c in STAGE_COLUMNS)
        + (f"{'vs torch':>10}" if compared else "")
    )


def _row(r: dict[str, Any], torch_rate: dict[tuple[str, int], float]) -> str:
    """One run's line; ``torch_rate``: torch's samples/s per (pipeline, workers), if it ran."""
    name = r["pipeline"] if r["library"] == "flowloader" else "  (torch)"
    stages = r.get("stage_ms_per_batch")
    stage_text = " ".join(f"{stages[c]:9.2f}" if stages else f"{'-':>9}" for c in STAGE_COLUMNS)
    first = f"{r['first_batch_s']:.3f}s" if r["first_batch_s"] is not None else "-"
    line = (
        f"{name:<15}{r['num_workers']:>8}{r['samples_per_s']:>11,.0f}{r['batches_per_s']:>10.1f}"
        f"{r['mb_per_s']:>8.0f}{first:>10}{r['cores_used']:>7.2f}                {stage_text}"
    )
    if not torch_rate:
        return line
    theirs = torch_rate.get((r["pipeline"], r["num_workers"]))
    ours = r["library"] == "flowloader"
    ratio = f"{r['samples_per_s'] / theirs:.2f}x" if ours and theirs else ""
    return f"{line}{ratio:>10}"


def plot(records: list[dict[str, Any]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    records = [r for r in records if r["num_workers"] != "auto"]  # the axis is a count
    keys = sorted({(r["library"], r["pipeline"]) for r in records})
    for library, pipeline in keys:
        runs = sorted(
            (r for r in records if (r["library"], r["pipeline"]) == (library, pipeline)),
            key=lambda r: r["num_workers"],
        )
        axes.plot(
            [r["num_workers"] for r in runs],
            [r["samples_per_s"] for r in runs],
            marker="o",
            linestyle="-" if library == "flowloader" else "--",
            label=f"{library} {pipeline}",
        )
    axes.set_xticks(sorted({r["num_workers"] for r in records}))
    axes.set_xlabel("num_workers")
    axes.set_ylabel("samples/s")
    axes.set_yscale("log")
    axes.set_title("Throughput against workers")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def run(options: Options) -> int:
    if options.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError("--plot needs matplotlib: pip install matplotlib") from None
    sides = {"flowloader": (flowloader.DataLoader, fl_datasets, fl_transforms)}
    if options.compare == "torch":
        sides["torch"] = _torch_modules()
    roots = roots_for(options)
    records: list[dict[str, Any]] = []
    try:
        for pipeline, root in roots.items():
            for workers in options.workers:
                for library, modules in sides.items():
                    if workers == "auto" and library != "flowloader":
                        continue  # torch's DataLoader has no "auto"
                    record = run_once(library, pipeline, root, workers, options, modules)
                    record["image_backend"] = image_backend()
                    records.append(record)
                    if options.json:
                        print(json.dumps(record), flush=True)
    except KeyboardInterrupt:  # what was measured is kept: shown, then the usual exit
        if records and not options.json:
            print("\ninterrupted; the runs measured so far:")
            print("\n".join(format_table(records)))
        raise
    if not options.json:
        print()
        print("\n".join(format_table(records)))
    if options.plot is not None:
        plot(records, options.plot)
        print(f"plot written to {options.plot}", file=sys.stderr)
    return 0
