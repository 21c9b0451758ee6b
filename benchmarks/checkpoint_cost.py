"""What ``DataLoader.state_dict()`` costs, and whether taking it stalls the workers.

The state is built in the main process from values the iterator keeps anyway (the generator
state captured at the start of the epoch, a batch count), so it should take microseconds and
leave the workers alone. Measured mid-epoch with 2 workers on a dataset of a million samples,
every 10 batches, compared with the time per batch of the same loop without it; and the
state's size as JSON, with a seeded generator and with ``generator=None`` (NumPy's global
generator, whose 624 state words are saved once for the loader and its RandomSampler), and,
where torch is installed, the PyTorch drop-in's: ``shuffle=True``, and a ``RandomSampler``
drawing from torch's global RNG after a model's initialisation beside the loader's own
generator (the state and the time ``state_dict`` takes between epochs, where it snapshots both
generators).

    python -m benchmarks.checkpoint_cost [--batches 400]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import time

import numpy as np

import flowloader as fl

from .common import environment


class Cheap(fl.Dataset):
    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, i: int):
        return np.full(64, i, np.float32), i


def cheap_loader() -> fl.DataLoader:
    return fl.DataLoader(Cheap(), batch_size=64, shuffle=True, num_workers=2, generator=0)


def loop_seconds(batches: int, every: int | None) -> tuple[float, list[float]]:
    """Time for ``batches`` batches, taking a checkpoint every ``every`` batches (or never)."""
    loader = cheap_loader()
    iterator = iter(loader)
    next(iterator)
    costs = []
    start = time.perf_counter()
    for step, _ in zip(range(batches), iterator, strict=False):
        if every and step % every == 0:
            taken = time.perf_counter()
            json.dumps(loader.state_dict())
            costs.append(time.perf_counter() - taken)
    elapsed = time.perf_counter() - start
    del iterator
    return elapsed, costs


def load_seconds(repeats: int = 50) -> list[float]:
    """``load_state_dict`` on a fresh loader of a state taken mid-epoch (the check of what
    was read: the samplers' settings, the dataset's description), the loader built outside
    the timing."""
    loader = cheap_loader()
    iterator = iter(loader)
    for _ in range(10):
        next(iterator)
    state = json.loads(json.dumps(loader.state_dict()))
    del iterator
    costs = []
    for _ in range(repeats):
        fresh = cheap_loader()
        taken = time.perf_counter()
        fresh.load_state_dict(state)
        costs.append(time.perf_counter() - taken)
    return costs


def state_bytes(generator: int | None) -> int:
    """The JSON size of a mid-epoch state of a shuffled loader with ``generator``."""
    loader = fl.DataLoader(Cheap(), batch_size=64, shuffle=True, generator=generator)
    iterator = iter(loader)
    next(iterator)
    return len(json.dumps(loader.state_dict()))


def drop_in_state(explicit_sampler: bool) -> tuple[int, float]:
    """The drop-in's mid-epoch state size and its ``state_dict`` time between epochs (ms)."""
    import torch

    from flowloader.utils import data as fud

    torch.manual_seed(0)
    torch.nn.Linear(1000, 1000)  # a model's initialisation draws on torch's global RNG
    dataset = range(100_000)
    sampler = fud.RandomSampler(dataset) if explicit_sampler else None
    loader = fud.DataLoader(dataset, batch_size=64, shuffle=not explicit_sampler, sampler=sampler)
    for _ in loader:
        pass
    costs = []
    for _ in range(50):
        taken = time.perf_counter()
        loader.state_dict()
        costs.append(time.perf_counter() - taken)
    iterator = iter(loader)
    next(iterator)
    return len(json.dumps(loader.state_dict())), statistics.median(costs) * 1e3


def measure(batches: int, runs: int = 5) -> dict:
    plain, checkpointed, costs = [], [], []
    for _ in range(runs):
        plain.append(loop_seconds(batches, None)[0])
        elapsed, taken = loop_seconds(batches, 10)
        checkpointed.append(elapsed)
        costs += taken
    loads = load_seconds()
    drop_in = {}
    if importlib.util.find_spec("torch") is not None:
        for name, explicit in (("shuffle", False), ("global_rng_sampler", True)):
            size, ms = drop_in_state(explicit)
            drop_in[f"drop_in_{name}_state_bytes"] = size
            drop_in[f"drop_in_{name}_state_dict_ms_between_epochs"] = ms
    return {
        "state_dict_ms_median": statistics.median(costs) * 1e3,
        "state_dict_ms_max": max(costs) * 1e3,
        "load_state_dict_ms_median": statistics.median(loads) * 1e3,
        "loop_s_plain": statistics.median(plain),
        "loop_s_checkpoint_every_10": statistics.median(checkpointed),
        "state_bytes_seeded": state_bytes(0),
        "state_bytes_generator_none": state_bytes(None),
        **drop_in,
    }


def section(quick: bool = False) -> str:
    batches = 100 if quick else 400
    r = measure(batches, 2 if quick else 5)
    return (
        f"{batches} batches of 64 with 2 workers, a checkpoint (state_dict + json.dumps) every "
        "10 batches:\n\n"
        "| state_dict, median | worst | load_state_dict, median | loop without checkpoints "
        "| loop with them |\n"
        "| ---: | ---: | ---: | ---: | ---: |\n"
        f"| {r['state_dict_ms_median']:.3f} ms | {r['state_dict_ms_max']:.3f} ms | "
        f"{r['load_state_dict_ms_median']:.3f} ms | "
        f"{r['loop_s_plain']:.3f} s | {r['loop_s_checkpoint_every_10']:.3f} s |\n\n"
        f"The state as JSON: {r['state_bytes_seeded']:,} bytes with a seeded generator, "
        f"{r['state_bytes_generator_none']:,} with generator=None."
        + "".join(
            f" The PyTorch drop-in, {name}: {r[f'drop_in_{name}_state_bytes']:,} bytes, "
            f"state_dict between epochs {r[f'drop_in_{name}_state_dict_ms_between_epochs']:.3f} ms."
            for name in ("shuffle", "global_rng_sampler")
            if f"drop_in_{name}_state_bytes" in r
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=400)
    args = parser.parse_args()
    print(environment())
    print(json.dumps(measure(args.batches), indent=2))


if __name__ == "__main__":
    main()
