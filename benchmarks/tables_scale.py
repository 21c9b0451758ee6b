"""Tables at scale (issue 39): how long opening a 10^8-row Parquet dataset of 100 files
takes (footers only), and the memory of a loader's workers over 20 epochs of a table larger
than their cache (BlockShuffleSampler, persistent workers): it should stay flat.

    python -m benchmarks.tables_scale [--epochs 20] [--json F]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

import numpy as np

from .common import children, environment, median, resident_bytes, write_json

FILES = 100
ROWS_PER_FILE = 1_000_000
MEMORY_ROWS = 400_000
CACHE_BYTES = 16 << 20


def write_wide_folder(folder: str) -> None:
    """100 files of 10^6 rows (an id and a small label), 10 row groups each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for k in range(FILES):
        ids = np.arange(k * ROWS_PER_FILE, (k + 1) * ROWS_PER_FILE)
        table = pa.table({"id": ids, "label": (ids % 1000).astype(np.int16)})
        pq.write_table(table, os.path.join(folder, f"part-{k:03d}.parquet"), row_group_size=100_000)


def open_seconds(folder: str, runs: int = 5) -> list[float]:
    from flowloader.tables import ParquetDataset

    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        ds = ParquetDataset(folder)
        seconds.append(time.perf_counter() - start)
        assert len(ds) == FILES * ROWS_PER_FILE
    return seconds


def worker_memory(folder: str, epochs: int) -> tuple[list[list[int]], int]:
    """Each worker's resident bytes after each epoch of a persistent loader, and the
    table's row groups."""
    import flowloader as fl
    from flowloader.tables import ParquetDataset

    from .tables import COLUMNS, write_table

    path = os.path.join(folder, "memory.parquet")
    write_table(path, MEMORY_ROWS)
    ds = ParquetDataset(path, COLUMNS, cache_bytes=CACHE_BYTES)
    sampler = fl.BlockShuffleSampler(ds, window=4, seed=0)
    loader = fl.DataLoader(
        ds, batch_size=256, sampler=sampler, num_workers=2, persistent_workers=True
    )
    me = os.getpid()
    per_epoch = []
    for _ in range(epochs):
        rows = sum(len(batch["id"]) for batch in loader)
        assert rows == MEMORY_ROWS
        per_epoch.append(sorted(resident_bytes(p) for p in children(me)))
    return per_epoch, len(ds.block_sizes())


def run(epochs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        wide = os.path.join(folder, "wide")
        os.mkdir(wide)
        write_wide_folder(wide)
        rss, row_groups = worker_memory(folder, epochs)
        return {"open_seconds": open_seconds(wide), "worker_rss": rss, "row_groups": row_groups}


def table(record: dict[str, Any]) -> str:
    seconds = record["open_seconds"]
    rss = record["worker_rss"]
    mb = [[b / 1e6 for b in epoch] for epoch in rss]
    lines = [
        f"Opening 10^8 rows in {FILES} Parquet files (footers only): median "
        f"{median(seconds):.3f} s (runs: {', '.join(f'{s:.3f}' for s in seconds)}).",
        "",
        f"Worker memory over {len(rss)} epochs of {MEMORY_ROWS:,} rows ({record['row_groups']} "
        f"row groups; more than the {CACHE_BYTES >> 20} MiB cache holds), "
        "BlockShuffleSampler(window=4), 2 persistent worker processes; resident MB of each "
        "worker after the epoch:",
        "",
        "| epoch | worker RSS (MB) |",
        "| ---: | --- |",
    ]
    for k, epoch in enumerate(mb, start=1):
        if k in (1, 2, 5, 10, 15, len(mb)):
            lines.append(f"| {k} | {', '.join(f'{v:.0f}' for v in epoch)} |")
    growth = max(mb[-1]) - max(mb[1]) if len(mb) > 1 else 0.0
    lines += ["", f"Growth from epoch 2 to epoch {len(mb)}: {growth:+.1f} MB."]
    return "\n".join(lines)


def section(quick: bool = False) -> str:
    return table(run(3 if quick else 20))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    record = run(args.epochs)
    print(table(record))
    write_json(args.json, [record])


if __name__ == "__main__":
    main()
