"""The ImageNet pipelines through flowloader, torch.utils.data (torchvision's v1 PIL
transforms and its v2 tensor path), NVIDIA DALI's CPU pipeline and the peer loaders: SPDL
(threads and processes), Grain (threads and processes) and torchdata.nodes (threads and
processes), all on the same JPEG files with the same num_workers (DALI: threads) and batch
size; float32 (ToTensor + Normalize) and uint8 (PILToTensor) outputs.

The peers run torchvision's ImageFolder sample function (PIL decode, torchvision transforms)
on their own engines and collate with torch's ``default_collate``, which is the work torch's
DataLoader does. "torch + v2" decodes with ``torchvision.io.decode_image`` and transforms
uint8 tensors with ``transforms.v2`` (what torchvision recommends for speed). DALI runs
``decoders.image_random_crop`` (or ``decoders.image``) + ``resize`` + ``crop_mirror_normalize``
on its CPU backend (``device_id=None``), each batch copied out to NumPy as its framework
iterators do. flowloader runs its own ImageFolder and transforms (the native kernel where
built). samples/s over the first ``batches`` batches, start-up included, and CPU seconds per
1,000 samples (all threads and worker processes). A peer that is not installed is left out.

    python -m benchmarks.peers [--workers 2] [--batches 30] [--runs 3] [--large] [--fresh]
        [--loader NAME ...] [--json F]

``--fresh``: each run in its own Python process, after an untimed one-batch run of the same
loader there; by default every loader runs in this one process, one after another, where
one's leftovers (DALI's threads, a peer's worker processes) can still be running during the
next one's window.

``--large``: 200 photos of 2048x1536 (as cameras produce) instead of the 2,000 built-in
500x375 JPEGs; ``--batches`` then counts batches of that smaller set (default 3).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import functools
import importlib.util
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from .common import environment, median, write_json

BATCH = 64
FRESH_TIMEOUT_S = 90  # a fresh run that takes longer has hung (torchdata.nodes' processes did)
PIPELINES = ("imagenet-train", "imagenet-val")
# (pipeline, uint8 output)
VARIANTS = [(p, False) for p in PIPELINES] + [(p, True) for p in PIPELINES]
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


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


def _torchvision_dataset(pipeline: str, root: str, uint8: bool) -> Any:
    from torchvision import datasets, transforms

    from flowloader.cli import pipelines

    return pipelines.dataset(pipeline, root, datasets, transforms, uint8)


def _decode_tensor(path: str) -> Any:
    from torchvision.io import ImageReadMode, decode_image

    return decode_image(path, mode=ImageReadMode.RGB)


def _torchvision_v2_dataset(pipeline: str, root: str, uint8: bool) -> Any:
    """torchvision's fast path: decode to a uint8 tensor, transforms.v2 on tensors."""
    import torch
    from torchvision import datasets
    from torchvision.transforms import v2

    if pipeline == "imagenet-train":
        steps = [v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip()]
    else:
        steps = [v2.Resize(256, antialias=True), v2.CenterCrop(224)]
    if not uint8:
        steps += [v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)]
    return datasets.ImageFolder(root, transform=v2.Compose(steps), loader=_decode_tensor)


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


def flowloader_loader(pipeline: str, root: str, workers: int, uint8: bool) -> Built:
    import flowloader
    from flowloader.cli import pipelines
    from flowloader.vision import datasets, transforms

    ds = pipelines.dataset(pipeline, root, datasets, transforms, uint8)
    iterator = iter(flowloader.DataLoader(ds, BATCH, shuffle=True, num_workers=workers))
    return iterator, iterator.shutdown


def _torch(pipeline: str, root: str, workers: int, uint8: bool, v2: bool) -> Built:
    import torch.utils.data

    ds = (_torchvision_v2_dataset if v2 else _torchvision_dataset)(pipeline, root, uint8)
    iterator = iter(torch.utils.data.DataLoader(ds, BATCH, shuffle=True, num_workers=workers))
    return iterator, iterator._shutdown_workers


def _dali(pipeline: str, root: str, workers: int, uint8: bool) -> Built:
    """DALI's CPU pipeline for the same steps; each batch copied out of DALI's buffers."""
    from nvidia.dali import fn, pipeline_def, types

    @pipeline_def(batch_size=BATCH, num_threads=workers, device_id=None, seed=0)
    def imagenet():
        jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, name="files")
        if pipeline == "imagenet-train":
            images = fn.decoders.image_random_crop(
                jpegs, device="cpu", output_type=types.RGB, random_area=[0.08, 1.0],
                random_aspect_ratio=[3 / 4, 4 / 3],
            )  # fmt: skip
            images = fn.resize(images, resize_x=224, resize_y=224, antialias=True)
            crop, mirror = None, fn.random.coin_flip()
        else:
            images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
            images = fn.resize(images, resize_shorter=256, antialias=True)
            crop, mirror = (224, 224), 0
        scale = [0.0, 1.0] if uint8 else [255.0, 255.0]
        images = fn.crop_mirror_normalize(
            images, dtype=types.UINT8 if uint8 else types.FLOAT, output_layout="CHW", crop=crop,
            mean=[m * scale[0] for m in MEAN] if not uint8 else [0.0],
            std=[s * scale[1] for s in STD] if not uint8 else [1.0], mirror=mirror,
        )  # fmt: skip
        return images, labels

    pipe = imagenet()
    pipe.build()

    def batches() -> Iterator[Any]:
        while True:
            images, labels = pipe.run()
            yield images.as_array().copy(), labels.as_array().copy()

    return batches(), lambda: None


def _spdl(pipeline: str, root: str, workers: int, uint8: bool, processes: bool) -> Built:
    from spdl.pipeline import PipelineBuilder
    from torch.utils.data import default_collate

    ds = _torchvision_dataset(pipeline, root, uint8)
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


def _grain(pipeline: str, root: str, workers: int, uint8: bool, processes: bool) -> Built:
    import grain
    from torch.utils.data import default_collate

    ds = _torchvision_dataset(pipeline, root, uint8)
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


def _torchdata(pipeline: str, root: str, workers: int, uint8: bool, method: str) -> Built:
    import torch.utils.data
    from torchdata import nodes

    ds = _torchvision_dataset(pipeline, root, uint8)
    sampler = nodes.SamplerWrapper(torch.utils.data.RandomSampler(ds))
    mapped = nodes.ParallelMapper(sampler, ds.__getitem__, num_workers=workers, method=method)
    batched = nodes.Mapper(nodes.Batcher(mapped, BATCH), torch.utils.data.default_collate)
    loader = nodes.Loader(batched)
    iterator = iter(loader)
    return iterator, lambda: mapped.__del__() if hasattr(mapped, "__del__") else None


LOADERS: dict[str, tuple[str, Callable[[str, str, int, bool], Built]]] = {
    "flowloader": ("flowloader", flowloader_loader),
    "torch": ("torch", functools.partial(_torch, v2=False)),
    "torch + v2": ("torchvision", functools.partial(_torch, v2=True)),
    "DALI (CPU)": ("nvidia.dali", _dali),
    "spdl (threads)": ("spdl", functools.partial(_spdl, processes=False)),
    "spdl (processes)": ("spdl", functools.partial(_spdl, processes=True)),
    "grain (threads)": ("grain", functools.partial(_grain, processes=False)),
    "grain (processes)": ("grain", functools.partial(_grain, processes=True)),
    "torchdata.nodes (threads)": ("torchdata", functools.partial(_torchdata, method="thread")),
    "torchdata.nodes (processes)": ("torchdata", functools.partial(_torchdata, method="process")),
}


def measure(
    build: Callable[[str, str, int, bool], Built], pipeline: str, uint8: bool, root: str,
    workers: int, batches: int,
) -> tuple[float, float]:  # fmt: skip
    """(samples/s, CPU seconds per 1,000 samples) for the first ``batches`` batches, start-up
    included: a loader that computes ahead while its first batch is awaited (grain's
    mp_prefetch fills most of an epoch before handing out the first batch) cannot look
    faster than it is."""
    cpu, start, samples = _cpu_by_process(), time.perf_counter(), 0
    iterator, stop = build(pipeline, root, workers, uint8)
    for _, (images, _) in zip(range(batches), iterator, strict=False):
        samples += len(images)
    elapsed = time.perf_counter() - start
    used = _cpu_used(cpu, _cpu_by_process())
    stop()
    del iterator
    return samples / elapsed, used / samples * 1000


def camera_photos_root() -> str:
    """200 JPEGs of 2048x1536 (made once)."""
    from .imagenet import large_photos_root

    return large_photos_root(per_class=100)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def measure_fresh(
    name: str, pipeline: str, uint8: bool, large: bool, workers: int, batches: int
) -> tuple[float, float] | None:
    """:func:`measure` in a new Python process, after an untimed one-batch run of the same
    loader there (its imports and first-use set-up): nothing another loader started (DALI's
    threads, a peer's worker processes) is alive during the run. None (and a line on stderr)
    when the run fails or takes longer than ``FRESH_TIMEOUT_S``."""
    command = [sys.executable, "-m", "benchmarks.peers", "--one", name, pipeline,
               "--workers", str(workers), "--batches", str(batches)]  # fmt: skip
    command += ["--uint8"] * uint8 + ["--large"] * large
    try:
        done = subprocess.run(
            command, check=True, capture_output=True, text=True, timeout=FRESH_TIMEOUT_S
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        print(f"{name}, {pipeline}: no result ({type(error).__name__})", file=sys.stderr)
        return None
    rate, cpu = json.loads(done.stdout.strip().splitlines()[-1])
    return rate, cpu


def _one(name: str, pipeline: str, uint8: bool, large: bool, workers: int, batches: int) -> None:
    """The child of :func:`measure_fresh`: prints [samples/s, CPU s per 1,000 samples]."""
    from flowloader.cli import sample_data

    root = camera_photos_root() if large else sample_data.builtin("imagenet-like")
    build = LOADERS[name][1]
    measure(build, pipeline, uint8, root, workers, 1)
    print(json.dumps(measure(build, pipeline, uint8, root, workers, batches)))


def run(
    workers: int = 2, batches: int = 30, runs: int = 3, large: bool = False, fresh: bool = False,
    only: list[str] | None = None,
) -> list[dict]:  # fmt: skip
    from flowloader.cli import sample_data

    root = camera_photos_root() if large else sample_data.builtin("imagenet-like")
    available = {
        name: build
        for name, (module, build) in LOADERS.items()
        if _installed(module) and (not only or name in only)
    }
    records = []
    for pipeline, uint8 in VARIANTS[:2] if large else VARIANTS:
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in available}
        for _ in range(runs):
            for name, build in available.items():
                if fresh:
                    result = measure_fresh(name, pipeline, uint8, large, workers, batches)
                else:
                    result = measure(build, pipeline, uint8, root, workers, batches)
                if result is not None:
                    results[name].append(result)
        results = {name: values for name, values in results.items() if values}
        rates = {name: median([r for r, _ in values]) for name, values in results.items()}
        cpu = {name: median([c for _, c in values]) for name, values in results.items()}
        name = pipeline + (" (uint8)" if uint8 else "") + (", 2048x1536 photos" if large else "")
        records.append({"pipeline": name, "workers": workers, "rates": rates, "cpu": cpu})
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


def section_large(quick: bool = False) -> str:
    return table(run(batches=1 if quick else 3, runs=1 if quick else 3, large=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--large", action="store_true", help="200 photos of 2048x1536")
    parser.add_argument(
        "--fresh", action="store_true", help="each run in its own process, after a warm-up"
    )
    parser.add_argument("--loader", action="append", help="only these loaders (repeatable)")
    parser.add_argument("--json")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # measure_fresh's child
    parser.add_argument("--uint8", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    batches = args.batches if not args.large or args.batches != 30 else 3
    if args.one:
        name, pipeline = args.one
        _one(name, pipeline, args.uint8, args.large, args.workers, batches)
        return
    print(environment())
    records = run(args.workers, batches, args.runs, args.large, args.fresh, args.loader)
    print(table(records))
    write_json(args.json, records)


if __name__ == "__main__":
    main()
