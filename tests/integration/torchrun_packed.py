"""Run under torchrun by test_packed_loader.py: each rank reads its share of packed rows
(DistributedSampler over the rows), and rank 0 gathers every rank's tokens."""

from __future__ import annotations

import json
import os
import sys

import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(__file__))))

import flowloader as fl
from tests.integration.packed_tokens import packed_rows, row_tokens, write_sources


def main(directory: str, out: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    if rank == 0:
        write_sources(directory, 60_000)
    dist.barrier()
    from flowloader.text import TokenDataset

    sources = [TokenDataset(f"{directory}/s{k}.bin") for k in range(3)]
    rows = packed_rows(sources, 256, mixture=True)
    loader = fl.DataLoader(
        rows, batch_size=4, sampler=fl.DistributedSampler(rows, drop_last=True), num_workers=1
    )
    tokens: list[int] = []
    read_rows = 0
    for batch in loader:
        tokens += row_tokens(batch)
        read_rows += len(batch["tokens"])
    mine = {"rows": read_rows, "tokens": tokens}
    gathered: list = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, mine)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(gathered, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
