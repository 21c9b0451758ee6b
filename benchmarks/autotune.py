"""num_workers="auto" against a grid of fixed worker counts (issue 41), one whole epoch each,
warm-up included (a new loader per epoch), interleaved runs.

Pipelines: flowloader bench's ImageNet training pipeline (float32) and validation pipeline
(uint8) over its built-in ImageFolder (2,000 JPEGs of 500x375, batch 64), MNIST (the seed
example's transform, batch 64), and the training pipeline read by a loop that spends 20 ms of
CPU of its own per batch (its step rate is what counts there). The grid is num_workers 0-3
with worker processes and prefetch_factor 2 (the tuner sets only the worker count so far).

    python -m benchmarks.autotune [--runs 2] [--json F]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from .common import environment, median, write_json

GRID = (0, 1, 2, 3)
LOOP_CPU_S = 0.020


def _busy(seconds: float) -> None:
    """The training loop's own CPU work: a Python loop for ``seconds``."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def epoch_rate(make: Callable[[], Any], loop_cpu_s: float) -> tuple[float, Any]:
    """Batches/s over one whole epoch of a new loader (start-up included), and its iterator's
    tuning record."""
    loader = make()
    start = time.perf_counter()
    iterator = iter(loader)
    batches = 0
    for _ in iterator:
        batches += 1
        if loop_cpu_s:
            _busy(loop_cpu_s)
    rate = batches / (time.perf_counter() - start)
    return rate, iterator.stats().tuning


def pipelines() -> dict[str, tuple[Callable[[], Any], float]]:
    """name -> (dataset factory, the loop's CPU seconds per batch)."""
    from flowloader.cli import pipelines as bench_pipelines
    from flowloader.cli import sample_data
    from flowloader.vision import datasets, transforms

    from . import mnist

    root = sample_data.builtin("imagenet-like")

    def imagenet(name: str, uint8: bool = False) -> Callable[[], Any]:
        return lambda: bench_pipelines.dataset(name, root, datasets, transforms, uint8)

    def mnist_dataset() -> Any:
        normalize = transforms.Normalize((0.1307,), (0.3081,))
        transform = transforms.Compose([transforms.ToTensor(), normalize])
        return datasets.MNIST(mnist.ensure_data(), train=True, transform=transform)

    return {
        "imagenet-train float32": (imagenet("imagenet-train"), 0.0),
        "imagenet-val uint8": (imagenet("imagenet-val", uint8=True), 0.0),
        "MNIST": (mnist_dataset, 0.0),
        "imagenet-train, loop with 20 ms CPU per batch": (imagenet("imagenet-train"), LOOP_CPU_S),
    }


def measure(runs: int) -> list[dict[str, Any]]:
    import flowloader as fl

    records = []
    for name, (factory, loop_cpu_s) in pipelines().items():
        ds = factory()
        settings: dict[str, Any] = {f"num_workers={w}": w for w in GRID}
        settings["auto"] = "auto"
        rates: dict[str, list[float]] = {key: [] for key in settings}
        decisions: list[Any] = []
        for _ in range(runs):
            for key, workers in settings.items():

                def make(workers: Any = workers, ds: Any = ds) -> Any:
                    return fl.DataLoader(
                        ds, batch_size=64, shuffle=True, generator=0, num_workers=workers
                    )

                rate, tuning = epoch_rate(make, loop_cpu_s)
                rates[key].append(rate)
                if workers == "auto":
                    decisions.append([(round(c["at_s"], 2), c["num_workers"]) for c in tuning])
        records.append({"pipeline": name, "rates": rates, "auto_decisions": decisions})
    return records


def table(records: list[dict[str, Any]]) -> str:
    head = " | ".join(f"{w} workers" for w in GRID)
    lines = [
        f"| pipeline | {head} | auto | auto / best | auto's decisions (s, workers) |",
        "| --- | " + "---: | " * (len(GRID) + 2) + "--- |",
    ]
    ratios = []
    for record in records:
        medians = {key: median(values) for key, values in record["rates"].items()}
        best = max(v for k, v in medians.items() if k != "auto")
        ratio = medians["auto"] / best
        ratios.append(ratio)
        cells = " | ".join(f"{medians[f'num_workers={w}']:.1f}" for w in GRID)
        decisions = record["auto_decisions"][-1]
        lines.append(
            f"| {record['pipeline']} | {cells} | {medians['auto']:.1f} | {ratio:.2f}x | "
            f"{decisions} |"
        )
    lines += ["", f"auto / best grid point: mean {sum(ratios) / len(ratios):.2f}x"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    records = measure(args.runs)
    print("batches/s over one whole epoch (new loader each; medians of interleaved runs)")
    print(table(records))
    write_json(args.json, records)


if __name__ == "__main__":
    main()
