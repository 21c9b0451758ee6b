"""Run under torchrun by test_torchrun.py: save a mid-epoch position on one world size
("save"), then continue it on another ("resume"); rank 0 writes what every rank delivered."""

from __future__ import annotations

import json
import sys

import torch.distributed as dist

import flowloader as fl
from tests.integration.torchrun_shards import Ids, write_from_every_rank


def loader(n: int) -> fl.DataLoader:
    sampler = fl.DistributedSampler(Ids(n), shuffle=True, seed=7)  # rank/world from dist
    return fl.DataLoader(Ids(n), batch_size=3, sampler=sampler, num_workers=1)


def main() -> None:
    mode, n, state_path, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    dist.init_process_group("gloo")
    if mode == "save":
        first = loader(n)
        iterator = iter(first)
        delivered = [next(iterator).tolist() for _ in range(2)]
        if dist.get_rank() == 0:  # every rank's state is the same; one is saved
            with open(state_path, "w") as f:
                json.dump(first.state_dict(), f)
        del iterator
    else:
        resumed = loader(n)
        with open(state_path) as f:
            resumed.load_state_dict(json.load(f))
        delivered = [b.tolist() for b in resumed]
        resumed.sampler.set_epoch(1)
        next_epoch = [b.tolist() for b in resumed]
    mine = {"batches": delivered, "next_epoch": next_epoch if mode == "resume" else None}
    write_from_every_rank(mine, out)


if __name__ == "__main__":
    main()
