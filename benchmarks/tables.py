"""Reading a Parquet table (issue 39): rows/s of an epoch in sequence, fully shuffled and
block-shuffled, for flowloader and torch's DataLoader over the same ParquetDataset and
sampler, and Hugging Face `datasets` (the same file as a `Dataset`, `shuffle()`d, through
torch's DataLoader); 2 worker processes, batches of 256. Also how close BlockShuffleSampler
is to a full shuffle.

    python -m benchmarks.tables [--rows 1000000] [--runs 3] [--json F]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .common import alternate, environment, loaders, median, write_json

BATCH = 256
WORKERS = 2
ROW_GROUPS = 150
COLUMNS = ["id", "label", "score", "text", "embedding"]


def write_table(path: str, rows: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    words = np.array(["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog"])
    text = [" ".join(words[rng.integers(0, len(words), 9)]) for _ in range(1000)]
    embedding = rng.random((rows, 8), dtype=np.float32)
    table = pa.table(
        {
            "id": np.arange(rows),
            "label": rng.integers(0, 1000, rows),
            "score": rng.random(rows),
            "text": pa.array([text[i % 1000] for i in range(rows)]),
            "embedding": pa.FixedSizeListArray.from_arrays(embedding.reshape(-1), 8),
        }
    )
    pq.write_table(table, path, row_group_size=-(-rows // ROW_GROUPS))


def samplers(dataset: Any) -> dict[str, Callable[[int], Any]]:
    import flowloader as fl

    return {
        "in sequence": lambda epoch: None,
        "full shuffle": lambda epoch: fl.RandomSampler(dataset, generator=epoch),
        "BlockShuffleSampler": lambda epoch: _block(dataset, epoch),
    }


def _block(dataset: Any, epoch: int) -> Any:
    import flowloader as fl

    sampler = fl.BlockShuffleSampler(dataset, window=8, seed=0)
    sampler.set_epoch(epoch)
    return sampler


def epoch_rate(loader_class: Any, dataset: Any, sampler: Any) -> float:
    loader = loader_class(dataset, batch_size=BATCH, sampler=sampler, num_workers=WORKERS)
    start = time.perf_counter()
    rows = sum(len(batch["id"]) for batch in loader)
    assert rows == len(dataset), rows
    return rows / (time.perf_counter() - start)


def hf_rate(path: str, shuffle: bool, epoch: int) -> float:
    """`datasets`' own path: the file as a Dataset (Arrow memory-mapped), shuffled with its
    indices mapping, through torch's DataLoader with 2 workers."""
    import datasets
    import torch.utils.data

    hf = datasets.Dataset.from_parquet(path, cache_dir=os.path.dirname(path) + "/hf-cache")
    hf = hf.with_format("numpy", columns=COLUMNS)
    if shuffle:
        hf = hf.shuffle(seed=epoch)
    loader = torch.utils.data.DataLoader(hf, batch_size=BATCH, num_workers=WORKERS)
    start = time.perf_counter()
    rows = sum(len(batch["id"]) for batch in loader)
    return rows / (time.perf_counter() - start)


def shuffle_quality(dataset: Any) -> dict[str, float]:
    """How far each order is from a full shuffle: the share of neighbours from one row
    group, and the row groups a batch of 256 draws from."""
    import flowloader as fl

    starts = np.concatenate([[0], np.cumsum(dataset.block_sizes())])
    found = {}
    for name, sampler in (
        ("full shuffle", fl.RandomSampler(dataset, generator=0)),
        ("BlockShuffleSampler(window=8)", _block(dataset, 0)),
    ):
        groups = np.searchsorted(starts, np.fromiter(sampler, np.int64), side="right") - 1
        batches = groups[: len(groups) // BATCH * BATCH].reshape(-1, BATCH)
        found[f"{name}: neighbours from one row group"] = float(np.mean(groups[1:] == groups[:-1]))
        found[f"{name}: row groups per batch"] = float(
            np.mean([len(np.unique(b)) for b in batches])
        )
    return found


def run(rows: int, runs: int) -> dict[str, Any]:
    from flowloader.tables import ParquetDataset

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "table.parquet")
        write_table(path, rows)
        dataset = ParquetDataset(path, columns=COLUMNS)
        measure: dict[str, Callable[[], float]] = {}
        counter = iter(range(10**6))
        for loader_name, loader_class in loaders().items():
            for order, make in samplers(dataset).items():
                measure[f"{loader_name}, {order}"] = lambda c=loader_class, m=make: epoch_rate(
                    c, dataset, m(next(counter))
                )
        try:
            import datasets  # noqa: F401

            measure["HF datasets + torch, in sequence"] = lambda: hf_rate(path, False, 0)
            measure["HF datasets + torch, shuffle()"] = lambda: hf_rate(path, True, next(counter))
        except ImportError:
            print("datasets is not installed: leaving it out")
        rates = alternate(runs, measure)
        return {
            "rows": rows,
            "row_groups": ROW_GROUPS,
            "file_mb": os.path.getsize(path) / 1e6,
            "rates": rates,
            "quality": shuffle_quality(dataset),
        }


def table(record: dict[str, Any]) -> str:
    lines = [
        f"{record['rows']:,} rows in {record['row_groups']} row groups "
        f"({record['file_mb']:.0f} MB Parquet; columns {', '.join(COLUMNS)}), batches of "
        f"{BATCH}, {WORKERS} worker processes; rows/s, medians of interleaved epochs.",
        "",
        "| loader, order | rows/s | runs |",
        "| --- | ---: | --- |",
    ]
    for name, rates in record["rates"].items():
        shown = ", ".join(f"{r:,.0f}" for r in rates)
        lines.append(f"| {name} | {median(rates):,.0f} | {shown} |")
    lines += ["", "| order statistic | value |", "| --- | ---: |"]
    lines += [f"| {name} | {value:.3f} |" for name, value in record["quality"].items()]
    return "\n".join(lines)


def section(quick: bool = False) -> str:
    return table(run(100_000 if quick else 1_000_000, 1 if quick else 3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    record = run(args.rows, args.runs)
    print(table(record))
    write_json(args.json, [record])


if __name__ == "__main__":
    main()
