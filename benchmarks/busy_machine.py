"""num_workers="auto" on a busy machine (issue 55): with busy-loop processes taking the cores
(one per core by default), "auto" against the fixed settings it chooses among, in the same
run, and which worker method it picks, run after run.

Pipelines: flowloader bench's ImageNet training pipeline (float32, batch 64) over its
built-in ImageFolder, read by a loop that takes the batches as they come and by one that
spends 20 ms of CPU of its own per batch (benchmarks/autotune.py's). Each round reads one
epoch per setting with a new loader, in an order that rotates each round: in process, 1 and 2
worker processes and threads at prefetch 2, and "auto"; "auto"'s rate is set against the
best fixed setting's of the same round, and its worker method is recorded.

    python -m benchmarks.busy_machine [--busy 2] [--rounds 10] [--images 960] [--json F]
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from collections import Counter
from typing import Any

from .autotune import METHODS, epoch_rate, pipelines, setting_name
from .common import environment, median, rotated, write_json

FIXED = [(0, None, None)] + [(w, m, 2) for m in METHODS for w in (1, 2)]
PIPELINES = ("imagenet-train float32", "imagenet-train, loop with 20 ms CPU per batch")


def _spin() -> None:
    while True:
        pass


def start_busy(count: int) -> list[multiprocessing.Process]:
    """``count`` processes that spin on a core each until terminated."""
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(count)]
    for spinner in spinners:
        spinner.start()
    return spinners


def auto_method(tuning: list[dict[str, Any]]) -> str:
    """The kind of workers "auto" ended its epoch with."""
    last = tuning[-1] if tuning else {"num_workers": 0}
    if not last["num_workers"]:
        return "in process"
    return METHODS[last["worker_method"]]


def measure(name: str, rounds: int, images: int) -> dict[str, Any]:
    import flowloader as fl

    pipeline = pipelines()[name]
    full = pipeline.make()
    ds = fl.Subset(full, range(min(images, len(full))))
    settings = [*FIXED, ("auto", None, None)]
    rates: dict[str, list[float]] = {setting_name(*s): [] for s in settings}
    methods: list[str] = []
    for number in range(rounds):
        for setting in rotated(settings, number):
            rate, tuning = epoch_rate(pipeline.loader(ds, *setting), pipeline.loop_cpu_s)
            rates[setting_name(*setting)].append(rate)
            if setting[0] == "auto":
                methods.append(auto_method(tuning))
        print(f"  round {number + 1}: auto {rates['auto'][-1]:.2f} b/s ({methods[-1]})", flush=True)
    ratios = []
    for number in range(rounds):
        best = max(rates[setting_name(*s)][number] for s in FIXED)
        ratios.append(rates["auto"][number] / best)
    return {"pipeline": name, "rates": rates, "auto_methods": methods, "ratios": ratios}


def table(records: list[dict[str, Any]], busy: int) -> str:
    lines = [
        f"With {busy} busy-loop processes. Batches/s, median of the rounds; auto / best fixed "
        "setting of the same round.",
        "",
        "| pipeline | in process | best fixed (median) | auto (median) | auto / best (median) | "
        "auto / best (lowest) | auto's method, per round |",
        "| --- | ---: | --- | ---: | ---: | ---: | --- |",
    ]
    for record in records:
        medians = {k: median(v) for k, v in record["rates"].items()}
        fixed = max((k for k in medians if k != "auto"), key=lambda k: medians[k])
        counts = Counter(record["auto_methods"])
        picked = ", ".join(
            f"{kind} {n}/{len(record['auto_methods'])}" for kind, n in counts.items()
        )
        lines.append(
            f"| {record['pipeline']} | {medians[setting_name(0)]:.2f} | "
            f"{fixed}: {medians[fixed]:.2f} | {medians['auto']:.2f} | "
            f"{median(record['ratios']):.2f}x | {min(record['ratios']):.2f}x | {picked} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=2, help="busy-loop processes")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--images", type=int, default=960, help="images per epoch")
    parser.add_argument("--only", help="only the pipelines whose name holds this")
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    spinners = start_busy(args.busy)
    started = time.perf_counter()
    try:
        records = []
        for name in PIPELINES:
            if args.only and args.only not in name:
                continue
            print(f"{name}:", flush=True)
            records.append(measure(name, args.rounds, args.images))
    finally:
        for spinner in spinners:
            spinner.terminate()
            spinner.join(5)
    print(table(records, args.busy))
    print(f"({time.perf_counter() - started:.0f} s)")
    if args.json:
        write_json(args.json, {"busy": args.busy, "records": records})


if __name__ == "__main__":
    main()
