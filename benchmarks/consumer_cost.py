"""The main process's share: what the consumer side spends per batch with worker processes.

Hypothesis: with enough workers, throughput is capped by the one process that receives every
batch (waits, unpickles the Result, maps the views, keeps the order, the stats and the
releases). Here the workers do almost nothing: ``__getitems__`` takes the batch's arrays
from ``allocate`` (shared memory) without filling them and a collate_fn wraps them in a dict,
so a batch looks like an ImageNet one ({"image": (64, 3, 224, 224) uint8, "label": (64,)
int64}) but costs the workers a few dozen microseconds. The consumer drops each batch at
once, as a training step would before the next ``next``.

Two measures, each with 2 and 8 worker processes:

* wall clock: the main thread's CPU microseconds per batch (``time.thread_time``) over
  ``--batches`` batches after a warm-up, and batches/s; 1e6 / (CPU us per batch) is the
  ceiling the consumer sets when the workers keep up. Noisy on a busy machine.
* ``--callgrind``: instructions per batch of the main process alone, under
  ``valgrind --tool=callgrind``: after a warm-up, ``--batches`` batches are taken inside one
  ``functools.reduce`` call and callgrind counts only inside that call
  (``--toggle-collect``), so start-up and shut-down are left out rather than subtracted.
  The workers start with ``forkserver``, so they run outside valgrind at full speed and the
  batches are always ready: what is counted is the consumer at its ceiling. ``--runs``
  repeats it; the median is reported with the spread (how the batches arrive, one at a time
  or several per wait, varies from run to run).

    python -m benchmarks.consumer_cost [--batches 2000] [--runs 3] [--workers 2 8]
    python -m benchmarks.consumer_cost --callgrind [--batches 1000] [--runs 3] [--workers 2 8]
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any

import numpy as np

import flowloader as fl
from flowloader.batching import CollatedSamples

from .common import environment, write_json

BATCH = 64
IMAGE = (3, 224, 224)


class ReadyBatches(fl.Dataset):
    """Batches of uint8 images and int64 labels that cost the workers almost nothing: the
    arrays come from ``allocate`` (the shared memory the batch travels in) and only the
    labels are written."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> Any:
        return np.zeros(IMAGE, np.uint8), i

    def __getitems__(self, indices: list[int], allocate: Any = None) -> CollatedSamples:
        images = allocate((len(indices), *IMAGE), np.uint8)
        labels = allocate((len(indices),), np.int64)
        labels[:] = indices
        return CollatedSamples((images, labels), self.__getitem__)


def as_dict(samples: CollatedSamples) -> dict[str, np.ndarray]:
    """The collate_fn: the columns as a dict batch (no copy: they already lie in the arena)."""
    images, labels = samples.columns
    return {"image": images, "label": labels}


def make_loader(workers: int, batches: int, start_method: str | None) -> fl.DataLoader:
    return fl.DataLoader(
        ReadyBatches(BATCH * batches),
        batch_size=BATCH,
        num_workers=workers,
        collate_fn=as_dict,
        multiprocessing_context=start_method,
    )


def consume(iterator: Any, batches: int) -> None:
    for _ in range(batches):
        batch = next(iterator)
        del batch  # dropped before the next one, as a training step does


def measure(workers: int, batches: int, warmup: int = 50) -> dict[str, float]:
    """Main-thread CPU us per batch and batches/s over ``batches`` after ``warmup``."""
    iterator = iter(make_loader(workers, warmup + batches, None))
    consume(iterator, warmup)
    cpu, wall = time.thread_time(), time.perf_counter()
    consume(iterator, batches)
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    iterator.shutdown()
    return {"cpu_us_per_batch": cpu / batches * 1e6, "batches_per_s": batches / wall}


def run_consumer(workers: int, batches: int, warmup: int = 50) -> None:
    """The process callgrind instruments: ``batches`` batches inside the one
    ``functools.reduce`` call it counts, after a warm-up it does not; workers outside."""
    iterator = iter(make_loader(workers, warmup + batches, "forkserver"))
    consume(iterator, warmup)

    def step(_: None, __: int) -> None:
        next(iterator)  # dropped at once, as a training step would before the next

    functools.reduce(step, range(batches), None)
    iterator.shutdown()


def callgrind_instructions(workers: int, batches: int) -> int:
    """Instructions the main process executes taking ``batches`` batches (warm)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            "--collect-atstart=no",
            "--toggle-collect=functools_reduce",
            sys.executable,
            "-m",
            "benchmarks.consumer_cost",
            "--consume",
            str(batches),
            "--workers",
            str(workers),
        ]
        subprocess.run(command, check=True, capture_output=True)
        with open(out) as f:
            totals = re.search(r"^(?:summary|totals): (\d+)", f.read(), re.MULTILINE)
        assert totals is not None, "no totals in callgrind's output"
        return int(totals.group(1))


def instructions_per_batch(workers: int, batches: int, runs: int) -> dict[str, Any]:
    counts = [callgrind_instructions(workers, batches) / batches for _ in range(runs)]
    return {"instructions_per_batch": statistics.median(counts), "runs": counts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 8])
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--callgrind", action="store_true", help="count instructions instead")
    parser.add_argument("--consume", type=int, help=argparse.SUPPRESS)  # the instrumented run
    parser.add_argument("--json")
    args = parser.parse_args()
    # 8 workers on a small machine is the point here, not a mistake worth a warning
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    if args.consume is not None:
        run_consumer(args.workers[0], args.consume)
        return
    print(environment())
    records = []
    for workers in args.workers:
        if args.callgrind:
            record = instructions_per_batch(workers, args.batches, args.runs)
            spread = ", ".join(f"{count:,.0f}" for count in record["runs"])
            print(
                f"num_workers={workers}: {record['instructions_per_batch']:,.0f} instr/batch "
                f"(median of {spread})"
            )
        else:
            runs = [measure(workers, args.batches) for _ in range(args.runs)]
            cpu = statistics.median(r["cpu_us_per_batch"] for r in runs)
            rate = statistics.median(r["batches_per_s"] for r in runs)
            record = {"cpu_us_per_batch": cpu, "batches_per_s": rate, "runs": runs}
            print(
                f"num_workers={workers}: main thread {cpu:.1f} CPU us/batch "
                f"(ceiling {1e6 / cpu:,.0f} batches/s), measured {rate:,.0f} batches/s"
            )
        records.append({"num_workers": workers, **record})
    write_json(args.json, records)


if __name__ == "__main__":
    main()
