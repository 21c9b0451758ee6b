"""The ImageNet pipelines through flowloader, torch.utils.data and the peer loaders: SPDL
(threads and processes), Grain (threads and processes) and torchdata.nodes (threads and
processes), all on the same JPEG files with the same num_workers and batch size.

Every peer runs torchvision's ImageFolder sample function (PIL decode, torchvision
transforms) on its own engine and collates with torch's ``default_collate``, which is the work
torch's DataLoader does; flowloader runs its own ImageFolder and transforms (the same
numerics, its planned batch path). samples/s over the first ``batches`` batches of an epoch
(2,000 images: 31 batches), start-up included, and CPU seconds per 1,000 samples (all threads
and worker processes, which start with fork for torch and flowloader, spawn for grain). A
peer that is not installed is left out.

    python -m benchmarks.peers [--workers 2] [--batches 30] [--runs 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import functools
import importlib.util
import time
from collections.abc import Callable, Iterator
from typing import Any

from .common import environment, median, write_json

BATCH = 64
PIPELINES = ("imagenet-train", "imagenet-val")


def _cpu_by_process() -> dict[int, float]:
    """CPU seconds so far of this process and every live descendant (peers keep their worker
    processes alive past the measurement, so reaped-children totals would miss them)."""
    import psutil

    me = psutil.Process()
    seconds = {}
    for process in [me, *me.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        seconds[process.pid] = times.user + times.system
    return seconds


def _cpu_used(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def _torchvision_dataset(pipeline: str, root: str) -> Any:
    from torchvision import datasets, transforms

    from flowloader.cli import pipelines

    return pipelines.dataset(pipeline, root, datasets, transforms)


def _order(count: int) -> list[int]:
    import numpy as np

    return np.random.default_rng(0).permutation(count).tolist()


def _batched(samples: Iterator[Any]) -> Iterator[Any]:
    from torch.utils.data import default_collate

    batch = []
    for sample in samples:
        batch.append(sample)
        if len(batch) == BATCH:
            yield default_collate(batch)
            batch = []


# Each builder returns (an iterator of batches, a function that stops it and its workers).
Built = tuple[Iterator[Any], Callable[[], None]]


def flowloader_loader(pipeline: str, root: str, workers: int) -> Built:
    import flowloader
    from flowloader.cli import pipelines
    from flowloader.vision import datasets, transforms

    ds = pipelines.dataset(pipeline, root, datasets, transforms)
    iterator = iter(flowloader.DataLoader(ds, BATCH, shuffle=True, num_workers=workers))
    return iterator, iterator.shutdown


def torch_loader(pipeline: str, root: str, workers: int) -> Built:
    import torch.utils.data

    ds = _torchvision_dataset(pipeline, root)
    iterator = iter(torch.utils.data.DataLoader(ds, BATCH, shuffle=True, num_workers=workers))
    return iterator, iterator._shutdown_workers


def _spdl(pipeline: str, root: str, workers: int, processes: bool) -> Built:
    from spdl.pipeline import PipelineBuilder
    from torch.utils.data import default_collate

    ds = _torchvision_dataset(pipeline, root)
    executor = concurrent.futures.ProcessPoolExecutor(workers) if processes else None
    built = (
        PipelineBuilder()
        .add_source(_order(len(ds)))
        .pipe(ds.__getitem__, concurrency=workers, executor=executor)
        .aggregate(BATCH, drop_last=True)
        .pipe(default_collate)
        .add_sink(3)
        .build(num_threads=workers)
    )
    built.start()

    def stop() -> None:
        built.stop()
        if executor is not None:
            executor.shutdown()

    return iter(built.get_iterator(timeout=120)), stop


def _grain(pipeline: str, root: str, workers: int, processes: bool) -> Built:
    import grain
    from torch.utils.data import default_collate

    ds = _torchvision_dataset(pipeline, root)
    source = grain.MapDataset.source(ds).shuffle(seed=0).batch(BATCH, batch_fn=default_collate)
    if processes:
        iterable = source.to_iter_dataset().mp_prefetch(
            grain.MultiprocessingOptions(num_workers=workers)
        )
    else:
        iterable = source.to_iter_dataset(grain.ReadOptions(num_threads=workers))
    iterator = iter(iterable)

    def stop() -> None:
        # grain 0.2.18 unpickles the torch tensors left in its queue on close, and fails.
        with contextlib.suppress(OSError):
            iterator.close()

    return iterator, stop


def _torchdata(pipeline: str, root: str, workers: int, method: str) -> Built:
    import torch.utils.data
    from torchdata import nodes

    ds = _torchvision_dataset(pipeline, root)
    sampler = nodes.SamplerWrapper(torch.utils.data.RandomSampler(ds))
    mapped = nodes.ParallelMapper(sampler, ds.__getitem__, num_workers=workers, method=method)
    batched = nodes.Mapper(nodes.Batcher(mapped, BATCH), torch.utils.data.default_collate)
    loader = nodes.Loader(batched)
    iterator = iter(loader)
    return iterator, lambda: mapped.__del__() if hasattr(mapped, "__del__") else None


LOADERS: dict[str, tuple[str, Callable[[str, str, int], Built]]] = {
    "flowloader": ("flowloader", flowloader_loader),
    "torch": ("torch", torch_loader),
    "spdl (threads)": ("spdl", functools.partial(_spdl, processes=False)),
    "spdl (processes)": ("spdl", functools.partial(_spdl, processes=True)),
    "grain (threads)": ("grain", functools.partial(_grain, processes=False)),
    "grain (processes)": ("grain", functools.partial(_grain, processes=True)),
    "torchdata.nodes (threads)": ("torchdata", functools.partial(_torchdata, method="thread")),
    "torchdata.nodes (processes)": ("torchdata", functools.partial(_torchdata, method="process")),
}


def measure(
    build: Callable[[str, str, int], Built], pipeline: str, root: str, workers: int, batches: int
) -> tuple[float, float]:
    """(samples/s, CPU seconds per 1,000 samples) for the first ``batches`` batches, start-up
    included: a loader that computes ahead while its first batch is awaited (grain's
    mp_prefetch fills most of an epoch before handing out the first batch) cannot look
    faster than it is."""
    cpu, start, samples = _cpu_by_process(), time.perf_counter(), 0
    iterator, stop = build(pipeline, root, workers)
    for _, (images, _) in zip(range(batches), iterator, strict=False):
        samples += len(images)
    elapsed = time.perf_counter() - start
    used = _cpu_used(cpu, _cpu_by_process())
    stop()
    del iterator
    return samples / elapsed, used / samples * 1000


def run(workers: int = 2, batches: int = 30, runs: int = 3) -> list[dict]:
    from flowloader.cli import sample_data

    root = sample_data.builtin("imagenet-like")
    available = {
        name: build
        for name, (module, build) in LOADERS.items()
        if importlib.util.find_spec(module) is not None
    }
    records = []
    for pipeline in PIPELINES:
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in available}
        for _ in range(runs):
            for name, build in available.items():
                results[name].append(measure(build, pipeline, root, workers, batches))
        rates = {name: median([r for r, _ in values]) for name, values in results.items()}
        cpu = {name: median([c for _, c in values]) for name, values in results.items()}
        records.append({"pipeline": pipeline, "workers": workers, "rates": rates, "cpu": cpu})
    return records


def table(records: list[dict]) -> str:
    lines = []
    for record in records:
        rates, cpu = record["rates"], record["cpu"]
        peers = {n: r for n, r in rates.items() if n not in ("flowloader", "torch")}
        best = max(peers, key=peers.get) if peers else None
        lines += [
            f"\n{record['pipeline']}, num_workers={record['workers']}, batch {BATCH}\n",
            "| loader | samples/s | vs torch | CPU s / 1000 samples |",
            "| --- | ---: | ---: | ---: |",
        ]
        for name, rate in rates.items():
            ratio = f"{rate / rates['torch']:.2f}x" if "torch" in rates else "-"
            lines.append(f"| {name} | {rate:,.0f} | {ratio} | {cpu[name]:.2f} |")
        if best is not None:
            lines.append(
                f"\nflowloader / best peer ({best}): **{rates['flowloader'] / peers[best]:.2f}x**"
            )
    return "\n".join(lines)


def section(quick: bool = False) -> str:
    return table(run(batches=10 if quick else 30, runs=1 if quick else 3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    records = run(args.workers, args.batches, args.runs)
    print(table(records))
    write_json(args.json, records)


if __name__ == "__main__":
    main()
