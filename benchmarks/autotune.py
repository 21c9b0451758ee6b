"""The self-tuning loader (issue 41): num_workers="auto" against the full grid of fixed
settings, the time it takes to reach its rate, and its memory against budgets.

1. The grid. For each pipeline, one whole epoch per setting, warm-up included (a new loader
   each), interleaved: num_workers 0, and 1-4 worker processes or threads at prefetch_factor
   1, 2 and 4 (25 settings), against "auto" (workers, their kind and prefetch all tuned).
   Pipelines: flowloader bench's ImageNet training pipeline (float32) and validation pipeline
   (uint8) over its built-in ImageFolder (2,000 JPEGs of 500x375, batch 64); MNIST (the seed
   example's transform, batch 64); packed token rows (``Packed`` rows of 4,096 tokens from a
   2*10^7-token corpus, batch 8); a ``Mixture`` of the folder's two halves (70/30, the
   training pipeline); and the training pipeline read by a loop that spends 20 ms of CPU of
   its own per batch (its step rate is what counts there). The "auto" loader also reads a
   second epoch, which starts where the tuner got to: what the probe costs is paid once a
   loader.
   Head to head: the best of 25 single epochs sits above what that setting gives on a
   typical epoch (the noise picks the winner), so the grid's best three settings and "auto"
   are then read again, ``--rounds`` times each in rotating order; the best of them (by
   median) is the one "auto" is set against, round by round (a pair read close together in
   time, which the machine's drift hits alike), and the median of those ratios is reported:
   a comparison that no selection favours.
2. Warm-up: one "auto" loader read for ``WARMUP_S`` seconds (epoch after epoch); the time
   until its rate over the last second first reaches 90% of its rate over the run's last
   third.
3. Memory: 20 loaders of the training pipeline (38.5 MB batches), "auto" with worker
   processes (whose memory the kernel counts apart), budgets from 0.5 to 4 GiB, each read for
   ``MEMORY_BATCHES`` batches while a thread samples the loader's memory every 20 ms (its
   workers' USS less their private segments, and its segment files); and a budget too small
   for one batch.

    python -m benchmarks.autotune [--runs 1] [--rounds 5] [--only NAME] [--json F]
"""

from __future__ import annotations

import argparse
import multiprocessing
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .common import environment, median, rotated, write_json

METHODS = {"multiprocessing": "processes", "thread": "threads"}
GRID: list[tuple[int, str | None, int | None]] = [(0, None, None)] + [
    (workers, method, prefetch)
    for method in METHODS
    for workers in (1, 2, 3, 4)
    for prefetch in (1, 2, 4)
]
LOOP_CPU_S = 0.020
WARMUP_S = 12.0
MEMORY_BATCHES = 24
MB = 1 << 20
NEXT_EPOCH = "auto, next epoch"  # the same "auto" loader's second epoch, probe done
TOP = 3  # the grid's best settings read again head to head with "auto"


def setting_name(workers: Any, method: str | None = None, prefetch: int | None = None) -> str:
    if workers == "auto":
        return "auto"
    if not workers:
        return "in process"
    return f"{workers} {METHODS[method or 'multiprocessing']}, prefetch {prefetch}"


def _busy(seconds: float) -> None:
    """The training loop's own CPU work: a Python loop for ``seconds``."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def epoch_rate(loader: Any, loop_cpu_s: float) -> tuple[float, Any]:
    """Batches/s over one whole epoch of ``loader`` (start-up included), and its tuning."""
    start = time.perf_counter()
    iterator = iter(loader)
    batches = 0
    for _ in iterator:
        batches += 1
        if loop_cpu_s:
            _busy(loop_cpu_s)
    rate = batches / (time.perf_counter() - start)
    return rate, iterator.stats().tuning


class Pipeline:
    """A dataset factory, its batch size and the loop's CPU per batch."""

    def __init__(self, make: Callable[[], Any], batch_size: int, loop_cpu_s: float = 0.0):
        self.make, self.batch_size, self.loop_cpu_s = make, batch_size, loop_cpu_s

    def loader(self, ds: Any, workers: Any, method: str | None, prefetch: int | None) -> Any:
        import flowloader as fl

        options: dict[str, Any] = {}
        if workers != "auto" and workers:
            options = {"worker_method": method, "prefetch_factor": prefetch}
        return fl.DataLoader(
            ds,
            batch_size=self.batch_size,
            shuffle=True,
            generator=0,
            num_workers=workers,
            **options,
        )


def pipelines() -> dict[str, Pipeline]:
    import flowloader as fl
    from flowloader.cli import pipelines as bench_pipelines
    from flowloader.cli import sample_data
    from flowloader.text import Packed, TokenDataset
    from flowloader.vision import datasets, transforms

    from . import mnist, packing

    root = sample_data.builtin("imagenet-like")

    def imagenet(name: str, uint8: bool = False) -> Callable[[], Any]:
        return lambda: bench_pipelines.dataset(name, root, datasets, transforms, uint8)

    def mnist_dataset() -> Any:
        normalize = transforms.Normalize((0.1307,), (0.3081,))
        transform = transforms.Compose([transforms.ToTensor(), normalize])
        return datasets.MNIST(mnist.ensure_data(), train=True, transform=transform)

    def packed_rows() -> Any:
        return Packed(TokenDataset(packing.corpus(2 * 10**7)), 4096)

    def mixture() -> Any:
        folder = imagenet("imagenet-train")()
        halves = {
            "even": fl.Subset(folder, range(0, len(folder), 2)),
            "odd": fl.Subset(folder, range(1, len(folder), 2)),
        }
        return fl.Mixture(halves, {"even": 0.7, "odd": 0.3}, seed=0)

    return {
        "imagenet-train float32": Pipeline(imagenet("imagenet-train"), 64),
        "imagenet-val uint8": Pipeline(imagenet("imagenet-val", uint8=True), 64),
        "MNIST": Pipeline(mnist_dataset, 64),
        "packed token rows": Pipeline(packed_rows, 8),
        "Mixture of two folders": Pipeline(mixture, 64),
        "imagenet-train, loop with 20 ms CPU per batch": Pipeline(
            imagenet("imagenet-train"), 64, LOOP_CPU_S
        ),
    }


# -- 1. the grid -------------------------------------------------------------------------


def decision(change: dict[str, Any]) -> tuple[Any, ...]:
    """(seconds, workers, kind, prefetch) of one tuning change."""
    kind = METHODS.get(change["worker_method"], "") if change["num_workers"] else "in process"
    return (round(change["at_s"], 2), change["num_workers"], kind, change["prefetch_factor"])


def chosen(only: str | None) -> dict[str, Pipeline]:
    """The pipelines whose name holds ``only`` (all of them: None)."""
    return {name: p for name, p in pipelines().items() if not only or only in name}


def grid(runs: int, rounds: int, only: str | None) -> list[dict[str, Any]]:
    records = []
    for name, pipeline in chosen(only).items():
        print(f"grid: {name}", flush=True)
        ds = pipeline.make()
        settings = [*GRID, ("auto", None, None)]
        rates: dict[str, list[float]] = {setting_name(*s): [] for s in settings}
        decisions: list[Any] = []
        for _ in range(runs):
            for setting in settings:
                loader = pipeline.loader(ds, *setting)
                rate, tuning = epoch_rate(loader, pipeline.loop_cpu_s)
                rates[setting_name(*setting)].append(rate)
                if setting[0] == "auto":
                    decisions.append([decision(c) for c in tuning])
                    again, _ = epoch_rate(loader, pipeline.loop_cpu_s)  # probed: no probe
                    rates.setdefault(NEXT_EPOCH, []).append(again)
        record = {"pipeline": name, "rates": rates, "auto_decisions": decisions}
        if rounds:
            record["head_to_head"] = head_to_head(pipeline, ds, rates, rounds)
        records.append(record)
    return records


def head_to_head(
    pipeline: Pipeline, ds: Any, rates: dict[str, list[float]], rounds: int
) -> dict[str, list[float]]:
    """The grid's ``TOP`` settings and "auto", each read for one whole epoch with a new
    loader ``rounds`` times, in an order that rotates each round."""
    by_name = {setting_name(*s): s for s in GRID}
    ranked = sorted(by_name, key=lambda k: median(rates[k]), reverse=True)
    settings = [("auto", None, None)] + [by_name[k] for k in ranked[:TOP]]
    again: dict[str, list[float]] = {setting_name(*s): [] for s in settings}
    for number in range(rounds):
        for setting in rotated(settings, number):
            rate, _ = epoch_rate(pipeline.loader(ds, *setting), pipeline.loop_cpu_s)
            again[setting_name(*setting)].append(rate)
    return again


def head_to_head_table(records: list[dict[str, Any]]) -> str:
    lines = [
        f"| pipeline | the grid's best {TOP}, read again (median) | auto (median) | "
        "auto / best, same round (median) |",
        "| --- | --- | ---: | ---: |",
    ]
    ratios = []
    for record in records:
        again = record["head_to_head"]
        medians = {k: median(v) for k, v in again.items()}
        fixed = sorted((k for k in medians if k != "auto"), key=medians.get, reverse=True)
        # Paired: each round's "auto" against the same round's read of the best setting.
        ratio = median([a / b for a, b in zip(again["auto"], again[fixed[0]], strict=True)])
        ratios.append(ratio)
        shown = "; ".join(f"{k}: {medians[k]:.1f}" for k in fixed)
        lines.append(f"| {record['pipeline']} | {shown} | {medians['auto']:.1f} | {ratio:.2f}x |")
    rounds = len(records[0]["head_to_head"]["auto"])
    lines += [
        "",
        f"auto against the best setting read again, median of {rounds} rounds' ratios: "
        f"mean {sum(ratios) / len(ratios):.2f}x, lowest {min(ratios):.2f}x.",
    ]
    return "\n".join(lines)


def best_of(rates: dict[str, float], kind: str) -> str:
    """The best rate among the settings of ``kind`` ("processes", "threads"), with which."""
    key = max((k for k in rates if kind in k), key=lambda k: rates[k])
    return f"{rates[key]:.1f} ({key.replace(' ' + kind, '')})"


def grid_table(records: list[dict[str, Any]]) -> str:
    lines = [
        "| pipeline | in process | best processes | best threads | auto | auto / best | "
        "auto's decisions (s, workers, kind, prefetch) | auto, next epoch / best |",
        "| --- | ---: | --- | --- | ---: | ---: | --- | ---: |",
    ]
    ratios, next_ratios = [], []
    for record in records:
        medians = {key: median(values) for key, values in record["rates"].items()}
        fixed = {k: v for k, v in medians.items() if not k.startswith("auto")}
        best = max(fixed.values())
        ratio = medians["auto"] / best
        ratios.append(ratio)
        next_ratios.append(medians[NEXT_EPOCH] / best)
        lines.append(
            f"| {record['pipeline']} | {medians['in process']:.1f} | "
            f"{best_of(fixed, 'processes')} | {best_of(fixed, 'threads')} | "
            f"{medians['auto']:.1f} | {ratio:.2f}x | "
            f"{record['auto_decisions'][-1]} | {next_ratios[-1]:.2f}x |"
        )
    lines += ["", f"auto / best grid point: mean {sum(ratios) / len(ratios):.2f}x, "]
    lines[-1] += f"lowest {min(ratios):.2f}x. Batches/s over whole epochs. The same loader's "
    lines[-1] += f"next epoch (no probe): mean {sum(next_ratios) / len(next_ratios):.2f}x, "
    lines[-1] += f"lowest {min(next_ratios):.2f}x."
    return "\n".join(lines)


# -- 2. warm-up ---------------------------------------------------------------------------


def warmup(only: str | None) -> list[dict[str, Any]]:
    records = []
    for name, pipeline in chosen(only).items():
        print(f"warm-up: {name}", flush=True)
        loader = pipeline.loader(pipeline.make(), "auto", None, None)
        start = time.perf_counter()
        stamps: list[float] = []
        while time.perf_counter() - start < WARMUP_S:
            for _ in loader:
                if pipeline.loop_cpu_s:
                    _busy(pipeline.loop_cpu_s)
                stamps.append(time.perf_counter() - start)
                if stamps[-1] >= WARMUP_S:
                    break
        records.append({"pipeline": name, **time_to_90(np.array(stamps))})
    return records


def time_to_90(stamps: np.ndarray) -> dict[str, float]:
    """The rate over the run's last third, and the first time the rate over the second
    before reached 90% of it."""
    end = stamps[-1]
    final = np.count_nonzero(stamps >= end * 2 / 3) / (end / 3)
    reached = end
    for t in stamps:
        if t < 1.0:
            continue
        if np.count_nonzero((stamps > t - 1.0) & (stamps <= t)) >= 0.9 * final:
            reached = float(t)
            break
    return {"final_rate": float(final), "seconds_to_90": reached}


# -- 3. memory ----------------------------------------------------------------------------


class LoaderMemory:
    """Samples, every 20 ms, the loader's memory: its worker processes' USS less their
    private segments, and the segment files."""

    def __init__(self) -> None:
        from flowloader import resources

        self._resources = resources
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def now(self) -> int:
        from flowloader._ipc import shm
        from flowloader._iter.memory import segment_bytes

        total = segment_bytes(shm.process_prefix())
        for child in multiprocessing.active_children():
            if child.name.startswith("flowloader-worker") and child.pid is not None:
                found = self._resources.process_memory(child.pid)
                if found is not None:
                    total += found.uss - found.private_shmem
        return total

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.now())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def memory_runs() -> dict[str, Any]:
    import flowloader as fl
    from flowloader.errors import MemoryBudgetError

    pipeline = pipelines()["imagenet-train float32"]
    ds = pipeline.make()
    budgets = np.geomspace(512 * MB, 4096 * MB, 20).astype(int)
    runs = []
    for number, budget in enumerate(budgets):
        # Even runs: "auto" (worker processes); odd runs: 4 processes with prefetch 4 (16
        # batches in flight unless the budget lowers it).
        settings: dict[str, Any] = (
            {"num_workers": "auto", "worker_method": "multiprocessing"}
            if number % 2 == 0
            else {"num_workers": 4, "prefetch_factor": 4}
        )
        loader = fl.DataLoader(
            ds, batch_size=64, shuffle=True, generator=0, memory_budget=int(budget), **settings
        )
        watch = LoaderMemory()
        iterator = iter(loader)
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            for count, _ in enumerate(iterator, 1):
                if count >= MEMORY_BATCHES:
                    break
        stats = iterator.stats()
        iterator.shutdown()
        peak = watch.stop()
        runs.append(
            {
                "budget": int(budget),
                "peak": peak,
                "guard_peak": stats.memory["peak"] if stats.memory else None,
                "batch_bytes": stats.memory["batch_bytes"] if stats.memory else None,
                "setting": (stats.num_workers, stats.worker_method),
                "asked": "auto" if number % 2 == 0 else "4 processes, prefetch 4",
                "warned": [str(w.message) for w in said if "memory_budget" in str(w.message)],
            }
        )
        print(f"budget {budget / MB:.0f} MiB: peak {peak / MB:.0f} MiB", flush=True)
    error = ""
    try:
        loader = fl.DataLoader(ds, batch_size=64, num_workers=2, memory_budget=32 * MB)
        next(iter(loader))
    except MemoryBudgetError as found:
        error = str(found)
    workers_left = [c.name for c in multiprocessing.active_children()]
    return {"runs": runs, "too_small": error, "children_after": workers_left}


def memory_table(record: dict[str, Any]) -> str:
    lines = [
        "| budget MiB | asked | peak loader memory MiB | peak / budget | at the end | warned |",
        "| ---: | --- | ---: | ---: | --- | --- |",
    ]
    for run in record["runs"]:
        workers, method = run["setting"]
        lines.append(
            f"| {run['budget'] / MB:.0f} | {run['asked']} | {run['peak'] / MB:.0f} | "
            f"{run['peak'] / run['budget']:.2f} | {workers} {method or 'in process'} | "
            f"{'yes' if run['warned'] else 'no'} |"
        )
    over = sum(run["peak"] > run["budget"] for run in record["runs"])
    lines += [
        "",
        f"Runs over budget: {over} of {len(record['runs'])}. A 32 MiB budget with 36.8 MiB "
        f"(38.5 MB) batches: {record['too_small']!r}; processes left after it: "
        f"{record['children_after'] or 'none'}.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5, help="head-to-head rounds (0: none)")
    parser.add_argument("--only", help="only the pipelines whose name holds this (grid, warm-up)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["grid", "warmup", "memory"])
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    out: dict[str, Any] = {}
    if "grid" not in args.skip:
        out["grid"] = grid(args.runs, args.rounds, args.only)
        print(grid_table(out["grid"]))
        if args.rounds:
            print(head_to_head_table(out["grid"]))
    if "warmup" not in args.skip:
        out["warmup"] = warmup(args.only)
        for r in out["warmup"]:
            print(
                f"{r['pipeline']}: final {r['final_rate']:.1f} batches/s, 90% of it after "
                f"{r['seconds_to_90']:.1f} s"
            )
    if "memory" not in args.skip:
        out["memory"] = memory_runs()
        print(memory_table(out["memory"]))
    write_json(args.json, [out])


if __name__ == "__main__":
    main()
