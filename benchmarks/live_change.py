"""A live change of workers leaves the training loop's own randomness alone (issue 54).

With ``generator=None`` the loader shuffles with NumPy's global generator, which the training
loop draws from too (augmentation, dropout masks, exploration noise). Before this issue a
change of workers went through the resume path and rewound that generator to the epoch's
start, so the loop drew the same values again. Here: 100 epochs of ``num_workers="auto"``
whose tuner is scripted to change the worker count and kind several times an epoch
(threads and processes, with batches in flight), the loop drawing ``np.random.random()``
after every batch. Counted: the loop's repeated draws (expected 0) and the epochs whose
batches differ from an in-process loader's seeded alike (expected 0), beside the time per
epoch against ``num_workers=0`` and 2 fixed workers.

    python -m benchmarks.live_change [--epochs 100]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

import flowloader as fl
import flowloader.dataloader as dataloader_module
from flowloader._iter.tuning import Change, Setting

from .common import environment

BATCHES = 30  # per epoch (batch size 4)


class Rows(fl.Dataset):
    def __len__(self) -> int:
        return 4 * BATCHES

    def __getitem__(self, i: int) -> np.ndarray:
        return np.array([i, fl.sample_rng().integers(0, 1000)])


class ScriptedTuner:
    """Changes the workers after the batches its script names: worker count and kind."""

    chooses_method = False
    probing = False
    unmeasured_between = 0
    prefetch = 2

    def __init__(self, script: dict[int, Setting]) -> None:
        self.script, self.seen, self.changes = script, 0, []
        self.num_workers, self.method = 0, "thread"

    def observe(self, *measured: Any, batches: int = 1) -> Setting | None:
        self.seen += 1
        setting = self.script.get(self.seen)
        if setting is not None:
            self.changes.append(Change(0.0, setting.num_workers, "scripted", {}))
        return setting

    def workers_start(self) -> None:
        """Every epoch starts in process (the script counts the epoch's batches)."""
        self.seen = 0

    def limit(self, max_workers: int) -> Setting | None:
        return None

    def as_records(self) -> list[dict]:
        return [vars(change) for change in self.changes]


def script_for(epoch: int) -> dict[int, Setting]:
    """Three or four changes an epoch, at batches that move with the epoch."""
    rng = np.random.default_rng(epoch)
    at = sorted(rng.choice(np.arange(2, BATCHES - 2), size=4, replace=False).tolist())
    kinds = ["thread", "multiprocessing"]
    return {batch: Setting(int(rng.integers(0, 4)), kinds[int(rng.integers(0, 2))]) for batch in at}


def epoch_batches(loader: fl.DataLoader) -> tuple[list[list[int]], list[float], float]:
    """One epoch: its batches, the loop's draws after each, and its seconds."""
    batches, draws = [], []
    started = time.perf_counter()
    for batch in loader:
        batches.append(batch[:, 0].tolist())
        draws.append(float(np.random.random()))
    return batches, draws, time.perf_counter() - started


def measure(epochs: int) -> dict:
    original = dataloader_module.WorkerTuner
    repeated = wrong = changes = 0
    seconds: dict[str, list[float]] = {"auto, scripted": [], "0 workers": [], "2 threads": []}
    try:
        for epoch in range(epochs):
            np.random.seed(epoch)  # the epoch's shuffle and the loop's draws
            reference, _, took = epoch_batches(fl.DataLoader(Rows(), batch_size=4, shuffle=True))
            seconds["0 workers"].append(took)
            np.random.seed(epoch)
            fixed = fl.DataLoader(
                Rows(), batch_size=4, shuffle=True, num_workers=2, worker_method="thread"
            )
            seconds["2 threads"].append(epoch_batches(fixed)[2])
            tuner = ScriptedTuner(script_for(epoch))
            dataloader_module.WorkerTuner = lambda *_, tuner=tuner: tuner  # type: ignore[misc]
            np.random.seed(epoch)
            auto = fl.DataLoader(Rows(), batch_size=4, shuffle=True, num_workers="auto")
            batches, draws, took = epoch_batches(auto)
            seconds["auto, scripted"].append(took)
            dataloader_module.WorkerTuner = original  # type: ignore[misc]
            repeated += len(draws) - len(set(draws))
            wrong += batches != reference
            changes += len(tuner.changes)
    finally:
        dataloader_module.WorkerTuner = original  # type: ignore[misc]
    return {
        "epochs": epochs,
        "worker_changes": changes,
        "repeated_loop_draws": repeated,
        "epochs_with_other_batches": wrong,
        "median_epoch_ms": {k: float(np.median(v)) * 1e3 for k, v in seconds.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=100)
    args = parser.parse_args()
    print(environment())
    print(json.dumps(measure(args.epochs), indent=2))


if __name__ == "__main__":
    main()
