"""Reading a Parquet table (issue 39): rows/s of an epoch in sequence, fully shuffled and
block-shuffled, for flowloader and torch's DataLoader over the same ParquetDataset and
sampler; Hugging Face `datasets` (the same file as a `Dataset`: `shuffle()`d through torch's
DataLoader, and as flowloader's source; streamed with `shuffle(buffer_size)`); the same
table converted to Lance, read by flowloader's LanceDataset and by pylance's own torch
dataset; 2 worker processes, batches of 256. Also how close BlockShuffleSampler is to a
full shuffle.

Beside them, issue 59's numeric table (id int64, x float32, label int32; row groups of
50,000): flowloader in sequence and under BlockShuffleSampler(window=4), 2 worker processes,
a fresh loader per epoch, against pyarrow's own scan in one process
(``ParquetFile.iter_batches(256)`` + ``to_numpy`` per column, pandas imported beforehand:
pyarrow's conversion imports it, and a peer's process has usually paid that already).
``--numeric-only`` measures that part alone.

    python -m benchmarks.tables [--rows 1000000] [--runs 3] [--numeric-only] [--json F]
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


NUMERIC_GROUP_ROWS = 50_000
NUMERIC_PEER = "numeric: pyarrow iter_batches + to_numpy, one process, in sequence"


def write_numeric_table(path: str, rows: int) -> None:
    """Issue 59's table: id int64, x float32, label int32, in row groups of 50,000."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    table = pa.table(
        {
            "id": np.arange(rows),
            "x": rng.random(rows, dtype=np.float32),
            "label": rng.integers(0, 1000, rows).astype(np.int32),
        }
    )
    pq.write_table(table, path, row_group_size=NUMERIC_GROUP_ROWS)


def pyarrow_scan_rate(path: str) -> float:
    """pyarrow's own scan in one process: ``ParquetFile.iter_batches(256)``, each column
    ``to_numpy``."""
    import pandas  # noqa: F401  (to_numpy imports it; a peer's process has it already)
    import pyarrow.parquet as pq

    start = time.perf_counter()
    rows = 0
    for batch in pq.ParquetFile(path).iter_batches(BATCH):
        arrays = [column.to_numpy(zero_copy_only=False) for column in batch.columns]
        rows += len(arrays[0])
    return rows / (time.perf_counter() - start)


def numeric_measures(folder: str, rows: int) -> dict[str, Callable[[], float]]:
    """flowloader (2 workers, a fresh loader per epoch) and pyarrow's scan on the numeric
    table."""
    import flowloader as fl
    from flowloader.tables import ParquetDataset

    path = os.path.join(folder, "numeric.parquet")
    write_numeric_table(path, rows)
    dataset = ParquetDataset(path)

    def block(epoch: int) -> Any:
        sampler = fl.BlockShuffleSampler(dataset, window=4, seed=0)
        sampler.set_epoch(epoch)
        return sampler

    counter = iter(range(10**6))
    return {
        NUMERIC_PEER: lambda: pyarrow_scan_rate(path),
        "numeric: flowloader, in sequence": lambda: epoch_rate(fl.DataLoader, dataset, None),
        "numeric: flowloader, BlockShuffleSampler(window=4)": lambda: epoch_rate(
            fl.DataLoader, dataset, block(next(counter))
        ),
    }


def numeric_ratios(rates: dict[str, list[float]]) -> dict[str, float]:
    """Each numeric flowloader order against pyarrow's scan: the median of the ratios of
    the same rounds."""
    peer = rates.get(NUMERIC_PEER)
    if not peer:
        return {}
    return {
        f"{name} / pyarrow's scan": median([a / b for a, b in zip(got, peer, strict=True)])
        for name, got in rates.items()
        if name.startswith("numeric: flowloader")
    }


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


def hf_source(path: str) -> Any:
    """The file as a `datasets.Dataset` (NumPy format), to hand to flowloader's DataLoader as
    a map-style source: its `__getitems__` reads a batch's rows together."""
    import datasets

    hf = datasets.Dataset.from_parquet(path, cache_dir=os.path.dirname(path) + "/hf-cache")
    return hf.with_format("numpy", columns=COLUMNS)


def hf_stream_rate(path: str, epoch: int) -> float:
    """`datasets`' streaming path: the Parquet file as an IterableDataset with a shuffle
    buffer of 10,000 rows, through torch's DataLoader with 2 workers (one file is one shard:
    one worker reads it all, huggingface/datasets #7999)."""
    import datasets
    import torch.utils.data

    stream = datasets.load_dataset("parquet", data_files=path, split="train", streaming=True)
    stream = stream.shuffle(buffer_size=10_000, seed=epoch).with_format("numpy")
    loader = torch.utils.data.DataLoader(stream, batch_size=BATCH, num_workers=WORKERS)
    start = time.perf_counter()
    rows = sum(len(batch["id"]) for batch in loader)
    return rows / (time.perf_counter() - start)


def to_lance(path: str, uri: str) -> None:
    """The Parquet table as a Lance dataset of 10 fragments."""
    import lance
    import pyarrow.parquet as pq

    rows = pq.ParquetFile(path).metadata.num_rows
    lance.write_dataset(pq.read_table(path, columns=COLUMNS), uri, max_rows_per_file=rows // 10)


def pylance_rate(uri: str) -> float:
    """pylance's own torch dataset (an IterableDataset scanning its fragments, reading
    ahead on its threads; it has no row shuffle), batches as NumPy, through torch's
    DataLoader in the main process (it shards by rank, not by worker)."""
    import torch.utils.data
    from lance.torch.data import LanceDataset as PylanceTorch

    def as_numpy(batch: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return {name: batch[name].to_numpy(zero_copy_only=False) for name in batch.schema.names}

    stream = PylanceTorch(uri, BATCH, columns=COLUMNS, to_tensor_fn=as_numpy)
    loader = torch.utils.data.DataLoader(stream, batch_size=None)
    start = time.perf_counter()
    rows = sum(len(batch["id"]) for batch in loader)
    return rows / (time.perf_counter() - start)


def lance_measures(folder: str, path: str, counter: Any) -> dict[str, Callable[[], float]]:
    """flowloader's LanceDataset and pylance's torch dataset, where pylance is installed."""
    try:
        import lance  # noqa: F401
    except ImportError:
        print("pylance is not installed: leaving Lance out")
        return {}
    import flowloader as fl
    from flowloader.tables import LanceDataset

    uri = os.path.join(folder, "table.lance")
    to_lance(path, uri)
    dataset = LanceDataset(uri, COLUMNS)
    measure: dict[str, Callable[[], float]] = {
        "flowloader + LanceDataset, in sequence": lambda: epoch_rate(fl.DataLoader, dataset, None),
        "flowloader + LanceDataset, full shuffle": lambda: epoch_rate(
            fl.DataLoader, dataset, fl.RandomSampler(dataset, generator=next(counter))
        ),
    }
    try:
        import torch  # noqa: F401

        measure["pylance torch dataset, in sequence"] = lambda: pylance_rate(uri)
    except ImportError:
        pass
    return measure


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


def run(rows: int, runs: int, numeric_only: bool = False) -> dict[str, Any]:
    from flowloader.tables import ParquetDataset

    with tempfile.TemporaryDirectory() as folder:
        if numeric_only:
            rates = alternate(runs, numeric_measures(folder, rows))
            return {"rows": rows, "rates": rates, "ratios": numeric_ratios(rates)}
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
            import flowloader as fl

            source = hf_source(path)
            measure["flowloader + HF Dataset, in sequence"] = lambda: epoch_rate(
                fl.DataLoader, source, None
            )
            measure["flowloader + HF Dataset, full shuffle"] = lambda: epoch_rate(
                fl.DataLoader, source, fl.RandomSampler(source, generator=next(counter))
            )
            streaming = True
        except ImportError:
            print("datasets is not installed: leaving it out")
            streaming = False
        measure.update(lance_measures(folder, path, counter))
        measure.update(numeric_measures(folder, rows))
        rates = alternate(runs, measure)
        if streaming:  # once: it reads about 3,000 rows/s (one worker: one file, one shard)
            rates["HF datasets streaming + torch, shuffle(10,000), one run"] = [
                hf_stream_rate(path, 0)
            ]
        return {
            "rows": rows,
            "row_groups": ROW_GROUPS,
            "file_mb": os.path.getsize(path) / 1e6,
            "rates": rates,
            "ratios": numeric_ratios(rates),
            "quality": shuffle_quality(dataset),
        }


def table(record: dict[str, Any]) -> str:
    if "row_groups" in record:
        head = (
            f"{record['rows']:,} rows in {record['row_groups']} row groups "
            f"({record['file_mb']:.0f} MB Parquet; columns {', '.join(COLUMNS)}), batches of "
            f"{BATCH}, {WORKERS} worker processes; rows/s, medians of interleaved epochs."
        )
    else:
        head = f"{record['rows']:,} rows of the numeric table; rows/s of interleaved epochs."
    lines = [head, "", "| loader, order | rows/s | runs |", "| --- | ---: | --- |"]
    for name, rates in record["rates"].items():
        shown = ", ".join(f"{r:,.0f}" for r in rates)
        lines.append(f"| {name} | {median(rates):,.0f} | {shown} |")
    if record["ratios"]:
        lines += ["", "| numeric table, ratio | median of rounds |", "| --- | ---: |"]
        lines += [f"| {name} | {value:.2f}x |" for name, value in record["ratios"].items()]
    if "quality" in record:
        lines += ["", "| order statistic | value |", "| --- | ---: |"]
        lines += [f"| {name} | {value:.3f} |" for name, value in record["quality"].items()]
    return "\n".join(lines)


def section(quick: bool = False) -> str:
    return table(run(100_000 if quick else 1_000_000, 1 if quick else 3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--numeric-only", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    record = run(args.rows, args.runs, args.numeric_only)
    print(table(record))
    write_json(args.json, [record])


if __name__ == "__main__":
    main()
