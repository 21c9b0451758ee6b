"""Does ``memory_budget`` hold (issue 55)? ImageNet-sized batches (64 x 3 x 224 x 224
float32, 38.5 MB), worker processes and threads, a loop keeping 0%, 10% or 100% of an
epoch's batches, budgets of 0.5 to 4 GiB: every combination is a run of two epochs of a new
loader (2 workers, prefetch 2; persistent workers, so that pools live across epochs).

At every batch it reads ``stats().memory``: the loader's own memory (its workers' memory,
the batches in flight and pooled, its caches: what the budget bounds) against the budget,
and beside it what the loop keeps; it records whether the loader warned when the loop's
holdings alone passed the budget, and, after each epoch, how many batches' worth the loader
still holds in its pools (at most ``prefetch_factor x workers + 2``). As an independent
check on processes, the workers' unique memory is read from ``/proc/<pid>/smaps_rollup`` and
the machine's shared memory from ``/proc/meminfo`` (less the batches the loop keeps) at the
same points.

    python -m benchmarks.memory_budget [--batches 16] [--json F]
"""

from __future__ import annotations

import argparse
import itertools
import time
import warnings
from typing import Any

import numpy as np

import flowloader as fl
from flowloader import resources

from .common import environment, write_json

GIB = 1 << 30
SHAPE = (3, 224, 224)
BATCH = 64
WORKERS, PREFETCH = 2, 2
METHODS = ("multiprocessing", "thread")
KEEPS = (0.0, 0.1, 1.0)
BUDGETS = (0.5, 1.0, 2.0, 4.0)  # GiB


class ImageNetSized(fl.Dataset):
    """``count`` samples of an ImageNet training batch's shape, filled with their index."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        return np.full(SHAPE, index, np.float32), index


def shared_memory_bytes() -> int:
    """The machine's shared memory (``Shmem`` of /proc/meminfo)."""
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("Shmem:"):
                return int(line.split()[1]) * 1024
    return 0


def worker_memories(iterator: Any) -> list[resources.ProcessMemory]:
    """The memory of each worker process the kernel reports on."""
    found = []
    for worker in iterator._workers:  # torch's name: the worker processes
        memory = None if worker.pid is None else resources.process_memory(worker.pid)
        if memory is not None:
            found.append(memory)
    return found


def workers_unique(iterator: Any) -> int:
    """The worker processes' unique memory beside the shared memory only they map."""
    return sum(m.uss - m.private_shmem for m in worker_memories(iterator))


def pooled(loader: Any, iterator: Any, batch_bytes: int) -> float:
    """What the loader's pools keep between epochs, in batches: thread workers' blocks (free
    or lent), or the segments that only worker processes map (their pools: the main process
    has let go of them), in batches' bytes."""
    blocks = getattr(loader, "_thread_blocks", None)
    if blocks is not None and (blocks.free or blocks.lent):
        return float(len(blocks.free) + blocks.lent)
    return sum(m.private_shmem for m in worker_memories(iterator)) / batch_bytes


def run(method: str, keep: float, budget_gib: float, batches: int) -> dict[str, Any]:
    """Two epochs of a new loader; what the loader held, warned and kept in its pools."""
    budget = int(budget_gib * GIB)
    loader: fl.DataLoader = fl.DataLoader(
        ImageNetSized(batches * BATCH),
        batch_size=BATCH,
        num_workers=WORKERS,
        worker_method=method,
        prefetch_factor=PREFETCH,
        persistent_workers=True,
        memory_budget=budget,
    )
    every = 0 if keep == 0 else max(round(1 / keep), 1)
    batch_bytes = BATCH * int(np.prod(SHAPE)) * 4
    own_peak = kept_peak = independent_peak = 0
    shm_start = shared_memory_bytes()
    pooled_after: list[float] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            kept: list[Any] = []
            iterator = iter(loader)
            for number, batch in enumerate(iterator):
                if every and number % every == 0:
                    kept.append(batch)
                kept_peak = max(kept_peak, len(kept) * batch_bytes)
                memory = iterator.stats().memory or {}
                own = memory["workers_bytes"] + memory["batches_bytes"] + memory["caches_bytes"]
                own_peak = max(own_peak, own)
                if method == "multiprocessing":  # the kernel's count, the loop's part taken off
                    shared = shared_memory_bytes() - shm_start - len(kept) * batch_bytes
                    outside = workers_unique(iterator) + max(shared, 0)
                    independent_peak = max(independent_peak, outside)
                del batch
            del kept
            time.sleep(0.5)  # the releases reach the workers
            pooled_after.append(pooled(loader, iterator, batch_bytes))
            del iterator
    warned = any("the loop keeps" in str(w.message) for w in caught)
    del loader
    return {
        "method": method,
        "keep": keep,
        "budget_gib": budget_gib,
        "own_peak_bytes": own_peak,
        "within_budget": own_peak <= budget,
        "loop_peak_bytes": kept_peak,
        "loop_passed_budget": kept_peak > budget,
        "warned": warned,
        "pooled_batches_after_epochs": pooled_after,
        "pools_within": all(p <= PREFETCH * WORKERS + 2 for p in pooled_after),
        "independent_peak_bytes": independent_peak,
    }


def table(records: list[dict[str, Any]]) -> str:
    lines = [
        "| workers | loop keeps | budget | loader's peak (ledger) | within | the same from /proc "
        "| loop's peak | warned | batches pooled after each epoch |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: | --- | --- |",
    ]
    for r in records:
        warned = "yes" if r["warned"] else "no"
        if r["loop_passed_budget"] != r["warned"]:
            warned += " (!)"
        pooled = ", ".join(f"{p:.1f}" for p in r["pooled_batches_after_epochs"])
        lines.append(
            f"| {r['method']} | {r['keep']:.0%} | {r['budget_gib']} GiB | "
            f"{r['own_peak_bytes'] / 2**20:,.0f} MiB | {'yes' if r['within_budget'] else 'NO'} | "
            f"{r['independent_peak_bytes'] / 2**20:,.0f} MiB | "
            f"{r['loop_peak_bytes'] / 2**20:,.0f} MiB | {warned} | {pooled} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=16, help="batches an epoch")
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    started = time.perf_counter()
    records = []
    for method, keep, budget in itertools.product(METHODS, KEEPS, BUDGETS):
        records.append(run(method, keep, budget, args.batches))
        print(f"  {method}, keep {keep:.0%}, {budget} GiB: done", flush=True)
    print(table(records))
    held = sum(r["within_budget"] for r in records)
    warned_right = sum(r["loop_passed_budget"] == r["warned"] for r in records)
    pools = sum(r["pools_within"] for r in records)
    print(
        f"{len(records)} runs: loader within budget in {held}; warned exactly where the loop's "
        f"holdings passed the budget in {warned_right}; pools within prefetch x workers + 2 "
        f"after every epoch in {pools} ({time.perf_counter() - started:.0f} s)"
    )
    write_json(args.json, records)


if __name__ == "__main__":
    main()
