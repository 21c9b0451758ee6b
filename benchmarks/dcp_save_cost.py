"""What saving the loader through ``flowloader.integrations.dcp.Stateful`` costs on each rank
(issue 56: under 1 ms): the fixed-key form alone, and with the check that the ranks' shared
parts agree (one all_gather of a 32-byte digest), on 2 gloo ranks on 127.0.0.1, mid-epoch,
seeded and with ``generator=None``. Needs torch.

    python -m benchmarks.dcp_save_cost [--saves 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
from tests.integration.checkpoint_jobs import free_port

import flowloader as fl
from flowloader.integrations.dcp import Stateful

from .common import environment

WORLD = 2


class Cheap(fl.Dataset):
    def __len__(self) -> int:
        return 100_000

    def __getitem__(self, i: int):
        return np.full(16, i, np.float32)


def save_ms(loader: fl.DataLoader, check_ranks: bool, saves: int) -> tuple[float, int]:
    """Median milliseconds of ``Stateful.state_dict()`` and the saved form's JSON size."""
    stateful = Stateful(loader, check_ranks=check_ranks)
    costs = []
    for _ in range(saves):
        start = time.perf_counter()
        fixed = stateful.state_dict()
        costs.append(time.perf_counter() - start)
    return statistics.median(costs) * 1e3, len(json.dumps(fixed))


def rank_main(rank: int, port: int, saves: int, queue) -> None:
    import torch.distributed as dist

    # gloo's connections on loopback too (it otherwise binds the host name's address)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    results = {}
    for name, generator in (("seeded", 0), ("generator=None", None)):
        sampler = fl.DistributedSampler(Cheap(), seed=0)  # each rank its share
        loader = fl.DataLoader(Cheap(), batch_size=32, sampler=sampler, generator=generator)
        iterator = iter(loader)
        next(iterator)
        for check in (False, True):
            dist.barrier()
            results[f"{name}, check_ranks={check}"] = save_ms(loader, check, saves)
    queue.put((rank, results))
    dist.destroy_process_group()


def measure(saves: int) -> dict[str, dict[int, tuple[float, int]]]:
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    queue = context.Queue()
    port = free_port()
    processes = [
        context.Process(target=rank_main, args=(rank, port, saves, queue)) for rank in range(WORLD)
    ]
    for process in processes:
        process.start()
    gathered = dict(queue.get(timeout=300) for _ in processes)
    for process in processes:
        process.join(60)
    return {case: {rank: gathered[rank][case] for rank in gathered} for case in gathered[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=200)
    args = parser.parse_args()
    print(environment())
    print("| case | rank 0, median | rank 1, median | saved form (JSON bytes) |")
    print("| --- | ---: | ---: | ---: |")
    for case, ranks in measure(args.saves).items():
        print(f"| {case} | {ranks[0][0]:.3f} ms | {ranks[1][0]:.3f} ms | {ranks[0][1]:,} |")


if __name__ == "__main__":
    main()
