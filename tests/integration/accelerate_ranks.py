"""Run under torchrun (2 CPU ranks) by test_frameworks.py: Accelerate's ``prepare`` over the
drop-in loader. Each rank writes the sample ids it got per epoch and the batches' types.

``full`` runs two epochs and saves Accelerate's state after 3 batches; ``resume`` loads that
state in a new process and skips the 3 batches (Accelerate's mid-epoch recipe: ``set_seed``
first in both runs, ``load_state``, ``skip_first_batches``). ``engine-full`` and
``engine-resume`` do the same with the README's other recipe, which keeps flowloader's engine:
no ``prepare``, a ``DistributedSampler``, and ``register_for_checkpointing(loader)``.
"""

from __future__ import annotations

import json
import os
import sys

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from framework_data import SAMPLES, Ids, shuffled_loader

from flowloader.utils.data import DataLoader, DistributedSampler

SAVED_AFTER = 3


def ids_of(batches) -> list[list[int]]:
    seen = []
    for x, ids in batches:
        assert isinstance(x, torch.Tensor), type(x)
        assert isinstance(ids, torch.Tensor), type(ids)
        seen.append(ids.tolist())
    return seen


def two_epochs(loader, set_epoch, save_state) -> dict[int, list[list[int]]]:
    """The ids of every batch of two epochs, saving Accelerate's state after 3 batches."""
    seen: dict[int, list[list[int]]] = {}
    for epoch in range(2):
        set_epoch(epoch)
        seen[epoch] = []
        for batch in loader:
            seen[epoch] += ids_of([batch])
            if epoch == 0 and len(seen[0]) == SAVED_AFTER:
                save_state()
    return seen


def prepared(accelerator: Accelerator, mode: str, state_dir: str) -> tuple[dict, str]:
    """Accelerate's prepare over our loader; its own recipe to resume mid-epoch."""
    loader = accelerator.prepare(shuffled_loader())
    if mode == "full":
        seen = two_epochs(loader, loader.set_epoch, lambda: accelerator.save_state(state_dir))
    else:
        accelerator.load_state(state_dir)
        loader.set_epoch(0)
        seen = {0: ids_of(accelerator.skip_first_batches(loader, SAVED_AFTER))}
        loader.set_epoch(1)
        seen[1] = ids_of(loader)
    return seen, type(loader).__name__


def own_engine(accelerator: Accelerator, mode: str, state_dir: str) -> tuple[dict, str]:
    """Our loader as it is, split by our DistributedSampler; Accelerate checkpoints its
    state_dict() beside the rest and restores it with load_state."""
    dataset = Ids(SAMPLES)
    sampler = DistributedSampler(dataset)  # the world comes from torch.distributed
    loader = DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=2)
    accelerator.register_for_checkpointing(loader)
    if mode == "engine-full":
        seen = two_epochs(loader, sampler.set_epoch, lambda: accelerator.save_state(state_dir))
    else:
        accelerator.load_state(state_dir)  # the loader continues after its 3 batches
        seen = {0: ids_of(loader)}
        sampler.set_epoch(1)
        seen[1] = ids_of(loader)
    return seen, type(loader).__name__


def main() -> None:
    out_dir, mode = sys.argv[1], sys.argv[2]
    accelerator = Accelerator(cpu=True)
    set_seed(0)  # Accelerate's recipe: the same seed in the run and in its resumption
    if mode.startswith("engine"):
        seen, kind = own_engine(accelerator, mode, os.path.join(out_dir, "engine-state"))
    else:
        seen, kind = prepared(accelerator, mode, os.path.join(out_dir, "state"))
    with open(os.path.join(out_dir, f"{mode}-rank{accelerator.process_index}.json"), "w") as f:
        json.dump({"seen": seen, "prepared": kind}, f)


if __name__ == "__main__":
    main()
