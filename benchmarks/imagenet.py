"""The seed's ImageNet pipelines through ImageFolder: flowloader against torch.utils.data +
torchvision, same JPEG files, same num_workers, samples/s and CPU seconds per 1,000 samples.

imagenet-train: RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize.
imagenet-val:   Resize(256), CenterCrop(224), ToTensor, Normalize.
The data is flowloader bench's built-in ImageFolder (2,000 JPEGs of 500x375, cached).

    python -m benchmarks.imagenet [--workers 2] [--batches 30] [--runs 3]
"""

from __future__ import annotations

import argparse
import resource
import time

from .common import (
    environment,
    print_throughput,
    throughput_record,
    throughput_table,
    write_json,
)


def _cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure_epochs(
    library: str, pipeline: str, root: str, workers: int, epochs: int
) -> tuple[float, float]:
    """(samples/s, CPU seconds per 1,000 samples) over whole epochs, start-up included."""
    from flowloader.cli import pipelines

    loader_class, datasets, transforms = _modules(library)
    ds = pipelines.dataset(pipeline, root, datasets, transforms)
    loader = loader_class(ds, batch_size=16, shuffle=True, num_workers=workers)
    cpu, start, samples = _cpu_s(), time.perf_counter(), 0
    for _ in range(epochs):
        for images, _ in loader:
            samples += len(images)
    elapsed = time.perf_counter() - start
    return samples / elapsed, (_cpu_s() - cpu) / samples * 1000


def _modules(library: str):
    if library == "torch":
        import torch.utils.data
        from torchvision import datasets, transforms

        return torch.utils.data.DataLoader, datasets, transforms
    import flowloader
    from flowloader.vision import datasets, transforms

    return flowloader.DataLoader, datasets, transforms


def bare_loop_rate(pipeline: str, root: str, samples: int = 150) -> float:
    """flowloader's dataset alone, one core, no loader: samples/s (the per-core ideal)."""
    from flowloader.cli import pipelines

    _, datasets, transforms = _modules("flowloader")
    ds = pipelines.dataset(pipeline, root, datasets, transforms)
    ds[0]
    start = time.perf_counter()
    for i in range(samples):
        ds[i % len(ds)]
    return samples / (time.perf_counter() - start)


def measure(
    library: str, pipeline: str, root: str, workers: int, batches: int, uint8: bool = False
) -> tuple[float, float]:
    """(samples/s, CPU seconds per 1,000 samples) over ``batches`` batches after the first."""
    from flowloader.cli import pipelines

    loader_class, datasets, transforms = _modules(library)
    ds = pipelines.dataset(pipeline, root, datasets, transforms, uint8)
    return time_batches(loader_class(ds, batch_size=64, shuffle=True, num_workers=workers), batches)


def time_batches(loader, batches: int) -> tuple[float, float]:
    """(samples/s, CPU seconds per 1,000 samples) of ``loader`` over ``batches`` batches
    after the first, workers' CPU included."""
    iterator = iter(loader)
    next(iterator)
    cpu, start, samples = _cpu_s(), time.perf_counter(), 0
    for _, (images, _) in zip(range(batches), iterator, strict=False):
        samples += len(images)
    elapsed = time.perf_counter() - start
    del iterator  # workers exit and are reaped, so their CPU time is counted
    used = _cpu_s() - cpu
    return samples / elapsed, used / samples * 1000


def large_photos_root(per_class: int = 48) -> str:
    """2 x ``per_class`` JPEGs of 2048x1536, as phones and cameras produce (made once)."""
    import os
    import tempfile

    from flowloader.vision.datasets import make_image_folder

    name = f"flowloader-bench-large-photos-{2 * per_class}"
    root = os.path.join(tempfile.gettempdir(), name)
    make_image_folder(
        root, num_classes=2, images_per_class=per_class, size=(2048, 1536), quality=92
    )
    return root


def run(workers: int = 2, batches: int = 30, runs: int = 3, large: bool = False) -> list[dict]:
    from flowloader.cli import sample_data

    root = large_photos_root() if large else sample_data.builtin("imagenet-like")
    records = []
    variants = [(p, False) for p in ("imagenet-train", "imagenet-val")]
    if not large:
        variants += [(p, True) for p in ("imagenet-train", "imagenet-val")]
    for pipeline, uint8 in variants:
        results: dict[str, list[tuple[float, float]]] = {"flowloader": [], "torch": []}
        for _ in range(runs):
            for library in results:
                if large:
                    result = measure_epochs(library, pipeline, root, workers, batches)
                else:
                    result = measure(library, pipeline, root, workers, batches, uint8)
                results[library].append(result)
        name = pipeline + (" (uint8 output)" if uint8 else "")
        record = throughput_record(name, workers, results)
        if pipeline == "imagenet-train" and not uint8 and not large:
            ideal = workers * bare_loop_rate(pipeline, root)
            record["share_of_ideal"] = record["flowloader_samples_per_s"] / ideal
        records.append(record)
    return records


def section(quick: bool = False, large: bool = False) -> str:
    if large:  # "batches" counts whole epochs of 96 photos here
        records = run(batches=1 if quick else 2, runs=1 if quick else 3, large=True)
    else:
        records = run(batches=10 if quick else 30, runs=1 if quick else 3)
    table = throughput_table(records)
    shares = [r for r in records if "share_of_ideal" in r]
    if shares:
        table += (
            f"\n\nflowloader's training pipeline reaches {shares[0]['share_of_ideal']:.0%} of its "
            "own ideal (2 x the single-core bare-loop rate of the same dataset and transforms)."
        )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--large", action="store_true", help="2048x1536 photos instead")
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    records = run(args.workers, args.batches, args.runs, args.large)
    for r in records:
        if "share_of_ideal" in r:
            print(f"share of ideal (2 x bare loop): {r['share_of_ideal']:.0%}")
    print_throughput(records)
    write_json(args.json, records)


if __name__ == "__main__":
    main()
