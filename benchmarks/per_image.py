"""Where one training sample's time goes, on one core: decode, crop + resize to 224x224,
and the float conversion (ToTensor + Normalize), for flowloader's native kernel, Pillow (+
NumPy for the conversion: torchvision's v1 path), torchvision v2 on tensors, and DALI's CPU
operators. Every library gets the same 200 JPEGs (flowloader bench's built-in 500x375 files,
or 2048x1536 photos with ``--large``); flowloader, Pillow and torchvision get the same crop
boxes (torchvision's RandomResizedCrop draws), DALI draws its own from the same
distribution. "decode" is what each library decodes for the crop: the whole file for Pillow
and torchvision, only the crop's region for flowloader (at the reduced scale it plans) and
DALI (its image_random_crop). flowloader writes into one reused slot, as in a DataLoader
worker (where the slot is the batch's shared memory); the others allocate as they do.
Milliseconds per image, best of 3 passes; each stage is the difference between running the
steps up to it and up to the one before. Below the table: flowloader's kernel and its whole
DataLoader in one process (``num_workers=0``, CPU per sample) as multiples of the entropy-
decoding floor, the least any libjpeg-based loader can spend (every row down to the crop's
last decoded at 1/8 scale, output discarded); on the 500x375 files also the whole process
tree's CPU per sample with 2 worker processes on every core (whole epochs of two lengths,
differenced), as a multiple of the kernel's.

    python -m benchmarks.per_image [--images 200] [--large] [--json out.json]
"""

from __future__ import annotations

import argparse
import glob
import io
import itertools
import os
import pathlib
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image

from .common import environment, write_json

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
DALI_BATCH = 20


def _best_ms(fn: Callable[[], None], count: int, passes: int = 3) -> float:
    best = float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best / count * 1000


def _boxes(files: list[bytes]) -> list[tuple[int, int, int, int]]:
    from flowloader.vision.transforms.transforms import crop_box

    rng = np.random.default_rng(0)
    boxes = []
    for data in files:
        width, height = Image.open(io.BytesIO(data)).size
        boxes.append(crop_box(height, width, (0.08, 1.0), (3 / 4, 4 / 3), rng))
    return boxes


def _as_decoded(*axes: Any) -> list[Any]:
    """Each axis's region written out as it is decoded (no resize): the floors' jobs."""
    from flowloader.vision import native

    return [
        native.Axis(a.in_size, 0.0, float(a.in_size), a.in_size, 0, a.in_size, a.origin)
        for a in axes
    ]


def _read_by_kept(axis: Any, support: float) -> Any:
    """The pixels of ``axis`` that its kept outputs read (Pillow's filter bounds, no
    margin), written out as they are decoded: the validation floor's job."""
    from flowloader.vision import native

    scale = (axis.in1 - axis.in0) / axis.out_size
    reach = support * max(scale, 1.0)
    first = axis.in0 + (axis.start + 0.5) * scale
    last = axis.in0 + (axis.start + axis.kept - 0.5) * scale
    lo = max(int(first - reach + 0.5), 0)
    hi = min(int(last + reach + 0.5), axis.in_size)
    size = hi - lo
    return native.Axis(size, 0.0, float(size), size, 0, size, axis.origin + lo)


def _stages(run_to: dict[str, Callable[[], None]], count: int) -> dict[str, float]:
    """ms per image of each stage, from cumulative runs (decode, + resize, + conversion)."""
    totals = {name: _best_ms(fn, count) for name, fn in run_to.items()}
    names = list(totals)
    stages = {names[0]: totals[names[0]]}
    for before, name in itertools.pairwise(names):
        stages[name] = totals[name] - totals[before]
    stages["total"] = totals[names[-1]]
    return stages


def flowloader_stages(files: list[bytes], boxes: list) -> dict[str, float]:
    """The kernel's planned job for each crop (with its reduced scale), written into one
    reused slot as in a DataLoader worker; "decode" is the same job without the resize: the
    region at the job's scale, written out as it is."""
    from flowloader.vision import decode, native
    from flowloader.vision.geometry import NATIVE_DECODED_PER_OUTPUT, _reduced
    from flowloader.vision.transforms import Normalize

    if not native.available():
        return {}
    jobs = []
    for data, (top, left, h, w) in zip(files, boxes, strict=True):
        width, height = Image.open(io.BytesIO(data)).size
        x = native.Axis(w, 0.0, float(w), 224, 0, 224, left)
        y = native.Axis(h, 0.0, float(h), 224, 0, 224, top)
        scale = decode.reduction_for(min(w, h) / 224 / NATIVE_DECODED_PER_OUTPUT)
        if scale > 1:
            x, y = _reduced(x, scale, width), _reduced(y, scale, height)
        region = _as_decoded(x, y)
        jobs.append(
            (
                native.NativeJpeg(data, scale, *region, 2, None, None),
                native.NativeJpeg(data, scale, x, y, 2, None, None),
                np.empty((3, region[1].in_size, region[0].in_size), np.uint8),
            )
        )
    mean_std = native.normalization(Normalize(MEAN, STD))
    uint8_slot, float_slot = np.zeros((3, 224, 224), np.uint8), np.zeros((3, 224, 224), "f4")
    return _stages(
        {
            "decode": lambda: [job.write(out, "uint8", False, False) for job, _, out in jobs],
            "crop + resize": lambda: [
                job.write(uint8_slot, "uint8", False, False) for _, job, _ in jobs
            ],
            "conversion": lambda: [
                job.write(float_slot, "normalized", False, False, mean_std) for _, job, _ in jobs
            ],
        },
        len(files),
    )


def entropy_floor_ms(files: list[bytes], boxes: list) -> float:
    """The least a libjpeg-based loader can spend on each crop: every row down to the crop's
    last entropy-decoded (Huffman decoding cannot skip), at 1/8 scale (the IDCT reduced to
    its DC term), the crop's columns written out as they are and discarded. ms per image."""
    from flowloader.vision import native
    from flowloader.vision.geometry import _reduced

    jobs = []
    for data, (top, left, h, w) in zip(files, boxes, strict=True):
        width, height = Image.open(io.BytesIO(data)).size
        x = _reduced(native.Axis(w, 0.0, float(w), w, 0, w, left), 8, width)
        y = _reduced(native.Axis(h, 0.0, float(h), h, 0, h, top), 8, height)
        region = _as_decoded(x, y)
        out = np.empty((3, region[1].in_size, region[0].in_size), np.uint8)
        jobs.append((native.NativeJpeg(data, 8, *region, 2, None, None), out))
    return _best_ms(
        lambda: [job.write(out, "uint8", False, False) for job, out in jobs], len(files)
    )


class _TimedKernel:
    """The native kernel module with its decode calls timed (CPU seconds, this process)."""

    def __init__(self, kernel: Any) -> None:
        self._kernel, self.seconds = kernel, 0.0

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._kernel, name)
        if not name.startswith("decode_"):
            return call

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return call(*args, **kwargs)
            finally:
                self.seconds += time.process_time() - start

        return timed


def loader_ms(
    root: str, samples: int, pipeline: str = "imagenet-train", uint8: bool = False
) -> tuple[float, float]:
    """flowloader's DataLoader in this process (``num_workers=0``, batch 64) on ``pipeline``
    over ``root``: CPU ms per sample (file reads, crop draws and collation included), and the
    part of it spent in the kernel's calls; from the pass whose ratio of the two is the
    median of three."""
    from unittest import mock

    import flowloader as fl
    from flowloader.cli import pipelines
    from flowloader.vision import datasets, native, transforms

    dataset = pipelines.dataset(pipeline, root, datasets, transforms, uint8)
    loader = fl.DataLoader(dataset, batch_size=64, shuffle=True)
    passes = []
    timed = _TimedKernel(native._kernel)
    with mock.patch.object(native, "_kernel", timed):
        for _ in range(3):
            batches = iter(loader)
            next(batches)  # warm: the page cache, the first batch's allocations
            timed.seconds, start, loaded = 0.0, time.process_time(), 0
            for images, _ in batches:  # the rest of the epoch, up to ``samples``
                loaded += len(images)
                if loaded >= samples:
                    break
            total = time.process_time() - start
            passes.append((total / loaded * 1000, timed.seconds / loaded * 1000))
    passes.sort(key=lambda p: p[0] / p[1])
    return passes[1]


def processes_ms(
    root: str, workers: int = 2, pipeline: str = "imagenet-train", short: int = 320,
    long: int = 1600, passes: int = 3,
) -> float:  # fmt: skip
    """CPU ms per sample of the whole process tree (this process and its worker processes,
    reaped at the epoch's end) with ``workers`` worker processes on every core this process
    may use: whole epochs over the first ``short`` and the first ``long`` samples, the
    difference divided by ``long - short``, so that starting the workers cancels out and no
    batch is loaded past the epoch's end; the median of ``passes``."""
    import flowloader as fl
    from flowloader.cli import pipelines
    from flowloader.vision import datasets, transforms

    from .imagenet import _cpu_s

    dataset = pipelines.dataset(pipeline, root, datasets, transforms, False)

    def epoch_cpu_s(samples: int) -> float:
        subset = fl.Subset(dataset, range(samples))
        loader = fl.DataLoader(subset, batch_size=64, shuffle=True, num_workers=workers)
        start = _cpu_s()
        for _ in loader:
            pass
        return _cpu_s() - start

    pinned = os.sched_getaffinity(0)
    os.sched_setaffinity(0, range(os.cpu_count() or 1))
    try:
        epoch_cpu_s(short)  # warm: the page cache
        per_sample = [
            (epoch_cpu_s(long) - epoch_cpu_s(short)) / (long - short) * 1000 for _ in range(passes)
        ]
    finally:
        os.sched_setaffinity(0, pinned)
    return statistics.median(per_sample)


def validation_uint8(files: list[bytes], root: str) -> dict[str, float]:
    """Validation with uint8 output (Resize 256, CenterCrop 224, PILToTensor), where
    torchvision v2 comes closest: ms per image of its floor for flowloader (the rows down to
    the crop's last entropy-decoded, and the pixels the crop's outputs read decoded at the
    scale the kernel plans, written out as they are: no resize, no margin), the kernel's
    whole job, the DataLoader in one process (CPU per sample), and torchvision v2
    (``decode_jpeg`` of the whole file, then ``Resize(256)`` and ``CenterCrop(224)`` on the
    uint8 tensor) when it is installed."""
    from flowloader.vision import native, transforms
    from flowloader.vision.plan import plan_for

    if not native.available():
        return {}
    plan = plan_for(
        transforms.Compose(
            [transforms.Resize(256), transforms.CenterCrop(224), transforms.PILToTensor()]
        )
    )
    assert plan.geometry is not None
    jobs, floors = [], []
    for data in files:
        job = plan.geometry.native_job(data, None, None, None)
        assert job is not None
        region = [_read_by_kept(axis, 1.0) for axis in (job.x, job.y)]  # bilinear
        out = np.empty((3, region[1].in_size, region[0].in_size), np.uint8)
        floors.append((native.NativeJpeg(data, job.scale, *region, 2, None, None), out))
        jobs.append(job)
    slot = np.empty((3, 224, 224), np.uint8)
    measured = {
        "floor": _best_ms(
            lambda: [j.write(o, "uint8", False, False) for j, o in floors], len(files)
        ),
        "kernel": _best_ms(
            lambda: [j.write(slot, "uint8", False, False) for j in jobs], len(files)
        ),
    }
    measured["loader"], measured["loader's kernel"] = loader_ms(root, 640, "imagenet-val", True)
    from .peers import _installed

    if _installed("torchvision"):
        import torch
        from torchvision.io import decode_jpeg
        from torchvision.transforms.v2 import functional as F2

        torch.set_num_threads(1)
        encoded = [torch.frombuffer(bytearray(data), dtype=torch.uint8) for data in files]
        measured["torchvision decode"] = _best_ms(
            lambda: [decode_jpeg(data) for data in encoded], len(files)
        )
        measured["torchvision"] = _best_ms(
            lambda: [
                F2.center_crop(F2.resize(decode_jpeg(data), [256], antialias=True), [224])
                for data in encoded
            ],
            len(files),
        )
    return measured


def pillow_stages(files: list[bytes], boxes: list) -> dict[str, float]:
    from flowloader.vision import transforms

    convert = transforms.Compose([transforms.ToTensor(), transforms.Normalize(MEAN, STD)])

    def decode() -> list[Image.Image]:
        return [Image.open(io.BytesIO(data)).convert("RGB") for data in files]

    def resize() -> list[Image.Image]:
        return [
            image.crop((left, top, left + w, top + h)).resize((224, 224), Image.BILINEAR)
            for image, (top, left, h, w) in zip(decode(), boxes, strict=True)
        ]

    return _stages(
        {
            "decode": decode,
            "crop + resize": resize,
            "conversion": lambda: [convert(i) for i in resize()],
        },
        len(files),
    )


def torchvision_v2_stages(files: list[bytes], boxes: list) -> dict[str, float]:
    import torch
    from torchvision.io import decode_jpeg
    from torchvision.transforms.v2 import functional as F2

    torch.set_num_threads(1)
    encoded = [torch.frombuffer(bytearray(data), dtype=torch.uint8) for data in files]

    def decode() -> list[Any]:
        return [decode_jpeg(data) for data in encoded]

    def resize() -> list[Any]:
        return [
            F2.resized_crop(image, top, left, h, w, [224, 224], antialias=True)
            for image, (top, left, h, w) in zip(decode(), boxes, strict=True)
        ]

    def convert() -> list[Any]:
        return [
            F2.normalize(F2.to_dtype(image, torch.float32, scale=True), MEAN, STD)
            for image in resize()
        ]

    return _stages({"decode": decode, "crop + resize": resize, "conversion": convert}, len(files))


def dali_stages(files: list[bytes], boxes: list) -> dict[str, float]:
    from nvidia.dali import fn, pipeline_def, types

    count = len(files) - len(files) % DALI_BATCH
    arrays = [np.frombuffer(data, np.uint8) for data in files[:count]]

    def pipeline(stage: int):
        @pipeline_def(batch_size=DALI_BATCH, num_threads=1, device_id=None, seed=0)
        def steps():
            jpegs = fn.external_source(source=arrays, cycle=True, batch=False)
            images = fn.decoders.image_random_crop(
                jpegs, device="cpu", output_type=types.RGB, random_area=[0.08, 1.0],
                random_aspect_ratio=[3 / 4, 4 / 3],
            )  # fmt: skip
            if stage == 0:
                return images
            images = fn.resize(images, resize_x=224, resize_y=224, antialias=True)
            if stage == 1:
                return images
            return fn.crop_mirror_normalize(
                images, dtype=types.FLOAT, output_layout="CHW",
                mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD],
            )  # fmt: skip

        pipe = steps()
        pipe.build()
        return lambda: [pipe.run() for _ in range(count // DALI_BATCH)]

    return _stages(
        {"decode": pipeline(0), "crop + resize": pipeline(1), "conversion": pipeline(2)}, count
    )


LIBRARIES = {
    "flowloader (native kernel)": ("flowloader", flowloader_stages),
    "Pillow + NumPy (torchvision v1)": ("PIL", pillow_stages),
    "torchvision v2 (tensors)": ("torchvision", torchvision_v2_stages),
    "DALI CPU operators": ("nvidia.dali", dali_stages),
}


def run(images: int = 200, large: bool = False) -> list[dict]:
    from flowloader.cli import sample_data

    from .peers import _installed, camera_photos_root

    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, threads included
    root = camera_photos_root() if large else sample_data.builtin("imagenet-like")
    paths = sorted(glob.glob(os.path.join(root, "*", "*.jpg")))[:images]
    files = [pathlib.Path(path).read_bytes() for path in paths]
    boxes = _boxes(files)
    records = []
    for name, (module, stages) in LIBRARIES.items():
        if not _installed(module):
            continue
        measured = stages(files, boxes)
        if measured and module == "flowloader":
            measured["entropy floor"] = entropy_floor_ms(files, boxes)
            measured["loader"], measured["loader's kernel"] = loader_ms(root, 640)
            if not large:
                measured["2 worker processes"] = processes_ms(root)
            if not large:
                validation = validation_uint8(files, root)
                records.append({"library": "validation uint8", "large": large, **validation})
        if measured:
            records.append({"library": name, "large": large, **measured})
    return records


def table(records: list[dict]) -> str:
    lines = [
        "| library, ms per image on one core | decode | crop + resize | conversion | total |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for r in records:
        if "decode" in r:
            lines.append(
                f"| {r['library']} | {r['decode']:.2f} | {r['crop + resize']:.2f} | "
                f"{r['conversion']:.2f} | {r['total']:.2f} |"
            )
    for r in records:
        if "entropy floor" in r:
            floor, loader, inner = r["entropy floor"], r["loader"], r["loader's kernel"]
            lines.append(
                f"\nflowloader against the entropy-decoding floor ({floor:.2f} ms: the rows down "
                f"to the crop's last at 1/8 scale): the kernel's total {r['total'] / floor:.2f}x; "
                f"the loader in one process {loader:.2f} ms per sample ({loader / floor:.2f}x), "
                f"{loader / inner:.2f}x the {inner:.2f} ms its kernel calls took."
            )
            if "2 worker processes" in r:
                processes = r["2 worker processes"]
                lines.append(
                    f"\nWith 2 worker processes (whole epochs, the process tree's CPU): "
                    f"{processes:.2f} ms per sample, {processes / inner:.2f}x the kernel's."
                )
        if "floor" in r:  # validation with uint8 output (none where the kernel is not built)
            floor, loader, inner = r["floor"], r["loader"], r["loader's kernel"]
            line = (
                f"\nValidation, uint8 output: the floor (the pixels the centre crop reads, at the "
                f"kernel's scale, no resize) {floor:.2f} ms; the kernel {r['kernel']:.2f} ms "
                f"({r['kernel'] / floor:.2f}x); the loader in one process {loader:.2f} ms "
                f"({loader / floor:.2f}x the floor, {loader / inner:.2f}x its kernel calls)"
            )
            if "torchvision" in r:
                line += (
                    f"; torchvision v2 {r['torchvision']:.2f} ms ({r['torchvision'] / floor:.2f}x"
                    f" the floor), of which decode_jpeg {r['torchvision decode']:.2f} ms"
                )
            lines.append(line + ".")
    return "\n".join(lines)


def section(quick: bool = False) -> str:
    small = table(run(images=60 if quick else 200))
    large = table(run(images=20 if quick else 60, large=True))
    return f"500x375 JPEGs:\n\n{small}\n\n2048x1536 photos:\n\n{large}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--large", action="store_true", help="2048x1536 photos")
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    records = run(args.images, args.large)
    print(table(records))
    write_json(args.json, records)


if __name__ == "__main__":
    main()
