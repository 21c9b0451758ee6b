"""An image-text table through the ImageNet training pipeline (issue 39): the built-in
ImageNet-like ImageFolder's JPEGs, and the same bytes in a Parquet table (image, label,
caption; row groups of 100), read by `ImageTable` with the same transform, the same loader
settings (2 worker processes, batches of 64), shuffled (the table also block-shuffled), and
by torch's DataLoader over the same table. A new loader per epoch (each worker starts cold
and reads the row groups it touches), and loaders with persistent workers (their epochs
after the first). Samples/s, interleaved runs.

    python -m benchmarks.image_table [--runs 3] [--json F]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

from .common import alternate, environment, loaders, median, write_json

BATCH = 64
WORKERS = 2
ROW_GROUP = 100


def _transform() -> Any:
    from flowloader.cli import pipelines
    from flowloader.vision import transforms

    return pipelines.transform("imagenet-train", transforms)


def write_table(root: str, path: str) -> None:
    """The ImageFolder's files, in its order, as a Parquet table of JPEG bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from flowloader.vision import datasets

    folder = datasets.ImageFolder(root)
    images = []
    for file, _ in folder.samples:
        with open(file, "rb") as stream:
            images.append(stream.read())
    labels = [label for _, label in folder.samples]
    captions = [f"a photo of a {folder.classes[label]}" for label in labels]
    table = pa.table({"image": images, "label": labels, "caption": captions})
    pq.write_table(table, path, row_group_size=ROW_GROUP, compression="none")


def epoch(loader: Any) -> float:
    start, samples = time.perf_counter(), 0
    for images, _ in loader:
        samples += len(images)
    return samples / (time.perf_counter() - start)


def run(runs: int) -> dict[str, Any]:
    import flowloader as fl
    from flowloader.cli import sample_data
    from flowloader.vision import datasets

    root = sample_data.builtin("imagenet-like")
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "images.parquet")
        write_table(root, path)
        files = datasets.ImageFolder(root, transform=_transform())
        table = datasets.ImageTable(path, "image", "label", transform=_transform())
        seeds = iter(range(10**6))

        def shuffled(loader_class: Any, ds: Any) -> Callable[[], float]:
            return lambda: epoch(
                loader_class(ds, BATCH, shuffle=True, num_workers=WORKERS, generator=next(seeds))
            )

        def blocked() -> float:
            sampler = fl.BlockShuffleSampler(table, window=8, seed=0)
            sampler.set_epoch(next(seeds))
            return epoch(fl.DataLoader(table, BATCH, sampler=sampler, num_workers=WORKERS))

        def kept(ds: Any) -> Callable[[], float]:
            """An epoch of a loader whose workers persist (their caches warm after the
            first epoch, which is run once before the first measurement)."""
            loader = fl.DataLoader(
                ds, BATCH, shuffle=True, num_workers=WORKERS, persistent_workers=True
            )
            epoch(loader)
            return lambda: epoch(loader)

        measure: dict[str, Callable[[], float]] = {
            "flowloader, ImageFolder files, shuffled": shuffled(fl.DataLoader, files),
            "flowloader, ImageTable, shuffled": shuffled(fl.DataLoader, table),
            "flowloader, ImageTable, BlockShuffleSampler": blocked,
            "flowloader, ImageFolder files, shuffled, persistent workers": kept(files),
            "flowloader, ImageTable, shuffled, persistent workers": kept(table),
        }
        torch_loader = loaders().get("torch")
        if torch_loader is not None:
            measure["torch, ImageTable, shuffled"] = lambda: epoch(
                torch_loader(table, BATCH, shuffle=True, num_workers=WORKERS)
            )
        rates = alternate(runs, measure)
        return {"images": len(files), "table_mb": os.path.getsize(path) / 1e6, "rates": rates}


def table(record: dict[str, Any]) -> str:
    lines = [
        f"{record['images']:,} JPEGs (the built-in ImageNet-like set; {record['table_mb']:.0f} MB "
        f"as Parquet, row groups of {ROW_GROUP}), ImageNet training pipeline, batches of "
        f"{BATCH}, {WORKERS} worker processes; samples/s, medians of interleaved epochs.",
        "",
        "| loader, source, order | samples/s | runs |",
        "| --- | ---: | --- |",
    ]
    for name, rates in record["rates"].items():
        shown = ", ".join(f"{r:,.0f}" for r in rates)
        lines.append(f"| {name} | {median(rates):,.0f} | {shown} |")
    rates = {name: median(r) for name, r in record["rates"].items()}
    files = rates["flowloader, ImageFolder files, shuffled"]
    warm = (
        rates["flowloader, ImageTable, shuffled, persistent workers"]
        / (rates["flowloader, ImageFolder files, shuffled, persistent workers"])
    )
    lines += [
        "",
        f"ImageTable / files, shuffled: {rates['flowloader, ImageTable, shuffled'] / files:.2f}x; "
        f"block-shuffled: {rates['flowloader, ImageTable, BlockShuffleSampler'] / files:.2f}x; "
        f"with persistent workers (caches warm): {warm:.2f}x.",
    ]
    return "\n".join(lines)


def section(quick: bool = False) -> str:
    return table(run(1 if quick else 5))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    record = run(args.runs)
    print(table(record))
    write_json(args.json, [record])


if __name__ == "__main__":
    main()
