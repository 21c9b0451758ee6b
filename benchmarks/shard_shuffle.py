"""How well ShardSampler shuffles, by window size, against a global random permutation: 100
shards of 1,000 samples, one epoch. Measured: how far a sample moves from its stored position
(as a share of the dataset), how often two neighbours in the order come from the same shard,
and how many shards a batch of 256 draws from (a global permutation: almost 256; a window of
w shards: at most w).

    python -m benchmarks.shard_shuffle [--json out.json]
"""

from __future__ import annotations

import argparse

import numpy as np

from .common import write_json

SHARDS, PER_SHARD, BATCH = 100, 1000, 256
WINDOWS = (1, 2, 4, 8, 16, 32)


class _Shards:
    def __len__(self) -> int:
        return SHARDS * PER_SHARD

    def shard_sizes(self) -> list[int]:
        return [PER_SHARD] * SHARDS


def measure(order: np.ndarray) -> dict[str, float]:
    total = len(order)
    moved = np.abs(np.arange(total) - np.argsort(order)) / total
    shard = order // PER_SHARD
    batches = shard[: total // BATCH * BATCH].reshape(-1, BATCH)
    return {
        "mean_move": float(moved.mean()),
        "median_move": float(np.median(moved)),
        "same_shard_neighbours": float(np.mean(shard[1:] == shard[:-1])),
        "shards_per_batch": float(np.mean([len(np.unique(b)) for b in batches])),
    }


def run() -> list[dict]:
    from flowloader.shards import ShardSampler

    records = []
    for window in WINDOWS:
        order = np.array(list(ShardSampler(_Shards(), window=window, seed=0)))
        records.append({"order": f"ShardSampler(window={window})", **measure(order)})
    permutation = np.random.default_rng(0).permutation(SHARDS * PER_SHARD)
    records.append({"order": "global permutation", **measure(permutation)})
    return records


def table(records: list[dict]) -> str:
    lines = [
        f"{SHARDS} shards x {PER_SHARD} samples, batch {BATCH}\n",
        "| order | mean move | median move | neighbours from one shard | shards per batch |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for r in records:
        lines.append(
            f"| {r['order']} | {r['mean_move']:.1%} | {r['median_move']:.1%} | "
            f"{r['same_shard_neighbours']:.1%} | {r['shards_per_batch']:.1f} |"
        )
    return "\n".join(lines)


def section(quick: bool = False) -> str:
    return table(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json")
    args = parser.parse_args()
    records = run()
    print(table(records))
    write_json(args.json, records)


if __name__ == "__main__":
    main()
