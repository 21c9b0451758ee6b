"""Run under torchrun by test_torchrun.py: every rank loads its shard; rank 0 writes them all."""

from __future__ import annotations

import json
import sys
import warnings

import torch.distributed as dist

import flowloader as fl


class Ids(fl.Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


class IdStream(fl.IterableDataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        return fl.shard_stream(range(self.n))


def loader(n: int, workers: int) -> fl.DataLoader:
    sampler = fl.DistributedSampler(Ids(n), shuffle=True, seed=3)  # rank/world from dist
    return fl.DataLoader(Ids(n), batch_size=4, sampler=sampler, num_workers=workers)


def main() -> None:
    n, out = int(sys.argv[1]), sys.argv[2]
    dist.init_process_group("gloo")
    batches = [b.tolist() for b in loader(n, workers=1)]
    first = loader(n, workers=1)
    iterator = iter(first)
    part = [next(iterator).tolist() for _ in range(2)]
    state = first.state_dict()
    del iterator
    second = loader(n, workers=0)
    second.load_state_dict(state)
    resumed = part + [b.tolist() for b in second]
    stream = [int(v) for b in fl.DataLoader(IdStream(n), batch_size=3, num_workers=2) for v in b]
    write_from_every_rank(
        {
            "batches": batches,
            "resumed": resumed,
            "stream": stream,
            "duplicate_warnings": duplicate_warnings(n),
        },
        out,
    )


def duplicate_warnings(n: int) -> list[str]:
    """What a loader that gives every rank the whole dataset warns (twice iterated: once),
    and what the loaders that split by rank warn (nothing)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        everything = fl.DataLoader(Ids(n), batch_size=4, shuffle=True)
        iter(everything)
        iter(everything)
        iter(loader(n, workers=0))
        iter(fl.DataLoader(IdStream(n), batch_size=3))
    return [str(w.message) for w in caught if "torch.distributed" in str(w.message)]


def write_from_every_rank(mine: dict, out: str) -> None:
    """all_gather every rank's ``mine``; rank 0 writes the list as JSON to ``out``."""
    gathered: list = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, mine)
    if dist.get_rank() == 0:
        with open(out, "w") as f:
            json.dump(gathered, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
