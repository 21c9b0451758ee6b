"""The ImageNet training pipeline from tar shards: local shards against our ImageFolder on the
same images, shards over loopback HTTP (a server in another process, 20 ms added per request,
200 MB/s per connection) against the same shards on local disk, and flowloader against the
webdataset package's WebLoader on the same shards from the same server. Same transforms
(flowloader's), same num_workers, batch 64; samples/s over one epoch from building the loader
(remote shards start with a cold cache, so their fetching is counted).

The shards are flowloader bench's built-in ImageFolder (2,000 JPEGs of 500x375) packed by
``flowloader make-shards`` into 8 shards of 250.

    python -m benchmarks.shards [--workers 2] [--runs 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

from tests.shard_server import served_from_another_process

from .common import environment, median, write_json

BATCH = 64
LATENCY_S = 0.020
BYTES_PER_S = 200e6


def _transform() -> Any:
    from flowloader.cli import pipelines
    from flowloader.vision import transforms

    return pipelines.transform("imagenet-train", transforms)


def packed_shards() -> tuple[str, list[str]]:
    """(the ImageFolder root, its shards), packed once."""
    from flowloader.cli import sample_data
    from flowloader.cli.make_shards import pack_image_folder

    root = sample_data.builtin("imagenet-like")
    destination = os.path.join(tempfile.gettempdir(), "flowloader-bench-shards")
    return root, pack_image_folder(root, destination, max_count=250).shards


def _epoch(loader: Any) -> float:
    start, samples = time.perf_counter(), 0
    for images, _ in loader:
        samples += len(images)
    return samples / (time.perf_counter() - start)


def image_folder(root: str, workers: int) -> float:
    import flowloader
    from flowloader.vision import datasets

    ds = datasets.ImageFolder(root, transform=_transform())
    return _epoch(flowloader.DataLoader(ds, BATCH, shuffle=True, num_workers=workers))


def image_shards(urls: list[str], workers: int, cache_dir: str | None = None) -> float:
    import flowloader
    from flowloader.shards import ShardSampler
    from flowloader.vision import datasets

    start = time.perf_counter()
    ds = datasets.ImageShards(urls, transform=_transform(), cache_dir=cache_dir)
    loader = flowloader.DataLoader(
        ds, BATCH, sampler=ShardSampler(ds, window=2), num_workers=workers
    )
    samples = sum(len(images) for images, _ in loader)
    return samples / (time.perf_counter() - start)


def web_loader(urls: list[str], workers: int) -> float:
    import numpy as np
    import webdataset as wds

    transform = _transform()

    def sample(pair: tuple[Any, bytes]) -> tuple[np.ndarray, int]:
        image, label = pair
        return transform(image), int(label)

    start = time.perf_counter()
    dataset = (
        wds.WebDataset(urls, shardshuffle=len(urls), nodesplitter=wds.split_by_node)
        .shuffle(500)
        .decode("pil")
        .to_tuple("jpg", "cls")
        .map(sample)
        .batched(BATCH)
    )
    loader = wds.WebLoader(dataset, batch_size=None, num_workers=workers)
    samples = sum(len(images) for images, _ in loader)
    return samples / (time.perf_counter() - start)


def run(workers: int = 2, runs: int = 3) -> dict[str, Any]:
    import importlib.util

    root, shards = packed_shards()
    directory = os.path.dirname(shards[0])
    names = [os.path.basename(s) for s in shards]
    with served_from_another_process(directory, LATENCY_S, BYTES_PER_S) as url:
        urls = [url(n) for n in names]

        def remote() -> float:
            cache = tempfile.mkdtemp(prefix="flowloader-bench-cache-")
            try:
                return image_shards(urls, workers, cache_dir=cache)
            finally:
                shutil.rmtree(cache, ignore_errors=True)

        measures: dict[str, Callable[[], float]] = {
            "ImageFolder (local files)": lambda: image_folder(root, workers),
            "ImageShards (local shards)": lambda: image_shards(shards, workers),
            "ImageShards (HTTP shards)": remote,
        }
        if importlib.util.find_spec("webdataset") is not None:
            measures["webdataset WebLoader (HTTP shards)"] = lambda: web_loader(urls, workers)
        results: dict[str, list[float]] = {name: [] for name in measures}
        for _ in range(runs):
            for name, measure in measures.items():
                results[name].append(measure())
    return {"workers": workers, "runs": results}


def table(record: dict[str, Any]) -> str:
    rates = {name: median(values) for name, values in record["runs"].items()}
    lines = [
        f"imagenet-train, num_workers={record['workers']}, batch {BATCH}, one epoch of 2,000\n",
        "| reader | samples/s | runs |",
        "| --- | ---: | --- |",
    ]
    for name, values in record["runs"].items():
        shown = ", ".join(f"{v:,.0f}" for v in values)
        lines.append(f"| {name} | {rates[name]:,.0f} | {shown} |")
    local, remote = rates["ImageShards (local shards)"], rates["ImageShards (HTTP shards)"]
    lines += [
        "",
        f"local shards / ImageFolder: **{local / rates['ImageFolder (local files)']:.2f}x**; "
        f"HTTP shards / local shards: **{remote / local:.2f}x**",
    ]
    web = rates.get("webdataset WebLoader (HTTP shards)")
    if web:
        lines[-1] += f"; flowloader / WebLoader over HTTP: **{remote / web:.2f}x**"
    return "\n".join(lines)


def section(quick: bool = False) -> str:
    return table(run(runs=1 if quick else 3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    record = run(args.workers, args.runs)
    print(table(record))
    write_json(args.json, record)


if __name__ == "__main__":
    main()
