"""Soak: 500 epochs with persistent workers and 500 without, on a small dataset; does
anything grow? Hypothesis: a loader that leaks nothing per epoch or per batch keeps the main
process's RSS and PSS, the workers' PSS, its open descriptors, its threads and its /dev/shm
entries flat from the start of the run to its end.

A dataset of 64 float32 samples of 3x32x32 and an int label, batch 8 (8 batches an epoch),
num_workers=2, fork; the consumer keeps the last batch of each epoch (as a validation cache
would) and drops it at the next. Figures after epoch 10 (warm) and after the last epoch.
Each loader runs in a fresh process; torch's row is measured the same way, for comparison.

    python -m benchmarks.soak [--epochs 500]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading

import numpy as np

from .common import environment
from .worker_memory import pss_bytes

WARM_EPOCH = 10


class Small:
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int):
        return np.full((3, 32, 32), i, np.float32), i


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def shm_entries() -> int:
    prefix = (f"flowloader_{os.getpid()}_", "torch_", "__KMP_REGISTERED_LIB", "sem.mp-")
    return sum(1 for name in os.listdir("/dev/shm") if name.startswith(prefix))


def snapshot(worker_pids: list[int]) -> dict[str, int]:
    alive = [pid for pid in worker_pids if os.path.exists(f"/proc/{pid}")]
    return {
        "main_rss": rss_bytes(os.getpid()),
        "main_pss": pss_bytes(os.getpid()),
        "workers_pss": sum(pss_bytes(pid) for pid in alive),
        "fds": len(os.listdir("/proc/self/fd")),
        "threads": threading.active_count(),
        "shm_entries": shm_entries(),
    }


def workers_of(iterator) -> list[int]:
    """The pids of the iterator's live worker processes (none once an epoch shut them)."""
    workers = getattr(iterator, "_workers", None)
    processes = getattr(workers, "processes", workers) or []  # ours / torch's
    pids = []
    for process in processes:
        try:
            pids.append(process.pid)
        except ValueError:  # closed after the epoch
            continue
    return pids


def soak(library: str, persistent: bool, epochs: int) -> dict:
    if library == "torch":
        import torch.utils.data

        loader_class = torch.utils.data.DataLoader
    else:
        import flowloader

        loader_class = flowloader.DataLoader
    loader = loader_class(Small(), batch_size=8, num_workers=2, persistent_workers=persistent)
    kept, readings = None, {}
    for epoch in range(1, epochs + 1):
        iterator = iter(loader)
        for batch in iterator:
            kept = batch  # the previous epoch's batch goes now
        if epoch in (WARM_EPOCH, epochs):
            readings[epoch] = snapshot(workers_of(iterator))
        del iterator
    del kept
    return {"start": readings[WARM_EPOCH], "end": readings[epochs]}


def run_fresh(library: str, persistent: bool, epochs: int) -> dict:
    code = (
        "import json, sys; from benchmarks.soak import soak; "
        f"print(json.dumps(soak({library!r}, {persistent}, {epochs})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def libraries() -> list[str]:
    import importlib.util

    return ["flowloader"] + (["torch"] if importlib.util.find_spec("torch") else [])


def section(quick: bool = False, epochs: int = 500) -> str:
    epochs = 30 if quick else epochs
    rows = []
    for library in libraries():
        for persistent in (True, False):
            figures = run_fresh(library, persistent, epochs)
            start, end = figures["start"], figures["end"]
            cells = []
            for key in ("main_rss", "main_pss", "workers_pss"):
                a, b = start[key] / 2**20, end[key] / 2**20
                change = f"{(b - a) / a:+.1%}" if a else "n/a"
                cells.append(f"{a:.1f} -> {b:.1f} ({change})")
            cells += [f"{start[k]} -> {end[k]}" for k in ("fds", "threads", "shm_entries")]
            mode = "persistent" if persistent else "new workers each epoch"
            rows.append(f"| {library} | {mode} | " + " | ".join(cells) + " |")
    return (
        f"{epochs} epochs each; figures after epoch {WARM_EPOCH} -> after epoch {epochs}.\n\n"
        "| loader | workers | main RSS MiB | main PSS MiB | workers PSS MiB | open fds | "
        "threads | /dev/shm entries |\n"
        "| --- | --- | --- | --- | --- | ---: | ---: | ---: |\n" + "\n".join(rows)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=500)
    args = parser.parse_args()
    print(environment())
    print(section(epochs=args.epochs))


if __name__ == "__main__":
    main()
