"""Per-sample augmentation at batch speed: small images in memory, each with its own draws.

The CIFAR recipe (RandomCrop(32, padding=4), RandomHorizontalFlip, ToTensor, Normalize;
batch 128) and MNIST (ToTensor + Normalize, and with RandomAffine(10, translate=(0.1, 0.1))
first; batch 64), flowloader's loader beside the NumPy floor measured in the same run and
beside torch's DataLoader with torchvision's v1 and v2 transforms, interleaved (each round
starts with the next side), on the same generated files (benchmarks.cifar / benchmarks.mnist
write them once):

- ``floor float32``: a gather of the batch's pixels, a CHW float32 copy and one affine pass
  in place (the work a batch cannot avoid, with no augmentation at all);
- ``floor uint8``: a gather and a CHW copy (the floor of the uint8 ending, PILToTensor);
- ``flowloader``: ``DataLoader(CIFAR10(transform=recipe), batch_size=128, shuffle=True)``;
  ``flowloader uint8``: the recipe ending in PILToTensor; ``flowloader threads``: thread
  workers;
- ``torchvision v1`` / ``torchvision v2``: torch's DataLoader over torchvision's CIFAR10 with
  the same recipe in ``torchvision.transforms`` / ``torchvision.transforms.v2`` (each image
  transformed alone, as torchvision's datasets do);
- ``kornia (batch, CPU)``: a shuffled gather as a float tensor through Kornia's RandomCrop,
  RandomHorizontalFlip and Normalize on the whole batch, each image with its own draws
  (when kornia is installed; in process only).

Each run times ``--batches`` batches after ``--warmup`` batches (worker start-up is not
timed); in process (``num_workers=0``) per second of the measuring thread's CPU time, which
other programs on a shared machine disturb far less than the clock (torch runs one thread),
with workers per second of the clock. Needs torch and torchvision for the peers (a separate
environment, e.g. /tmp/venv-tv with torch==2.14.1 torchvision==0.29.1; run with
``PYTHONPATH=src``); without them it measures flowloader and the floors.

    python -m benchmarks.augment [--workers 0,2] [--runs 5] [--batches 60] [--json out.json]

``--workers ""`` skips the CIFAR recipe (MNIST alone); ``--no-mnist`` skips MNIST.
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .cifar import MEAN, STD
from .cifar import ensure_data as ensure_cifar
from .common import environment, median, rotated, write_json
from .mnist import DEFAULT_ROOT as MNIST_ROOT
from .mnist import ensure_data as ensure_mnist

MNIST_MEAN, MNIST_STD = (0.1307,), (0.3081,)


# In process (num_workers=0) a side's rate is per second of the measuring thread's CPU time,
# which other programs on a shared machine disturb far less than the clock (and which idle
# threads of the process, torch's spinning OpenMP pool, do not inflate); with workers, the
# clock.
CLOCKS = {True: time.thread_time, False: time.perf_counter}


def timed(batches: Iterable[Any], count: int, warmup: int, cpu: bool = False) -> float:
    """Samples/s over ``count`` batches of ``batches`` after ``warmup`` untimed ones, per
    second of this thread's CPU time when ``cpu``, else of the clock."""
    clock = CLOCKS[cpu]
    iterator = iter(batches)
    for _ in range(warmup):
        next(iterator)
    seen = 0
    start = clock()
    for batch in itertools.islice(iterator, count):
        seen += len(batch[0])
    elapsed = clock() - start
    del iterator  # a loader's workers end with its iterator
    return seen / elapsed


def floor_batches(
    pixels: np.ndarray, batch_size: int, mean: tuple[float, ...], std: tuple[float, ...], dtype: Any
) -> Iterable[tuple[np.ndarray]]:
    """The floor: shuffled batches of ``pixels`` (N, H, W[, C]) gathered, copied to CHW (as
    float32 or uint8) and, for float32, scaled by one affine pass in place."""
    order = np.random.default_rng().permutation(len(pixels))
    channels = 1 if pixels.ndim == 3 else pixels.shape[3]
    scale = (1 / (255 * np.asarray(std, np.float32)))[:, None, None].astype(np.float32)
    shift = (-np.asarray(mean, np.float32) / np.asarray(std, np.float32))[:, None, None]
    for start in range(0, len(order) - batch_size + 1, batch_size):
        gathered = pixels[order[start : start + batch_size]]
        chw = gathered[:, None] if gathered.ndim == 3 else gathered.transpose(0, 3, 1, 2)
        out = np.empty((batch_size, channels, *gathered.shape[1:3]), dtype)
        out[...] = chw
        if dtype == np.float32:
            out *= scale
            out += shift
        yield (out,)


def have_kornia() -> bool:
    try:
        import kornia  # noqa: F401
    except ImportError:
        return False
    return True


def kornia_batches(
    pixels: np.ndarray, batch_size: int, mean: tuple[float, ...], std: tuple[float, ...]
) -> Iterable[tuple[Any]]:
    """Kornia's batch augmentation on CPU at the recipe's per-sample semantics (each image
    its own crop and flip: ``same_on_batch=False``), on shuffled gathers of ``pixels``."""
    import kornia.augmentation as K
    import torch

    augment = torch.nn.Sequential(
        K.RandomCrop((32, 32), padding=4),
        K.RandomHorizontalFlip(),
        K.Normalize(torch.tensor(mean), torch.tensor(std)),
    )
    order = np.random.default_rng().permutation(len(pixels))
    with torch.no_grad():
        for start in range(0, len(order) - batch_size + 1, batch_size):
            gathered = torch.from_numpy(pixels[order[start : start + batch_size]])
            yield (augment(gathered.permute(0, 3, 1, 2).float().div_(255)),)


def cifar_recipe(module: Any, ending: str = "float") -> Any:
    """The CIFAR recipe in ``module`` (flowloader's or torchvision's v1 transforms)."""
    head = [module.RandomCrop(32, padding=4), module.RandomHorizontalFlip()]
    if ending == "uint8":
        return module.Compose([*head, module.PILToTensor()])
    return module.Compose([*head, module.ToTensor(), module.Normalize(MEAN, STD)])


def cifar_v2_recipe() -> Any:
    import torch
    from torchvision.transforms import v2

    return v2.Compose(
        [
            v2.ToImage(),
            v2.RandomCrop(32, padding=4),
            v2.RandomHorizontalFlip(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(MEAN, STD),
        ]
    )


def flowloader_loader(
    dataset: Any, batch_size: int, workers: int, method: str = "multiprocessing"
) -> Any:
    import flowloader as fl

    return fl.DataLoader(
        dataset, batch_size=batch_size, shuffle=True, num_workers=workers, worker_method=method
    )


def torch_loader(dataset: Any, batch_size: int, workers: int) -> Any:
    import torch.utils.data

    return torch.utils.data.DataLoader(
        dataset, batch_size=batch_size, shuffle=True, num_workers=workers
    )


def torchvision_cifar(root: str, transform: Any) -> Any:
    import torchvision.datasets.cifar

    # The generated files cannot pass torchvision's md5 check of the real ones.
    torchvision.datasets.cifar.check_integrity = lambda path, md5=None: os.path.isfile(path)
    return torchvision.datasets.CIFAR10(root, train=True, transform=transform)


def have_torchvision() -> bool:
    try:
        import torch
        import torchvision  # noqa: F401
    except ImportError:
        return False
    torch.set_num_threads(1)  # as in torch's workers; the in-process rates are one thread's
    return True


def cifar_sides(workers: int, batches: int, warmup: int) -> dict[str, Callable[[], float]]:
    """The CIFAR recipe's sides at ``workers`` workers (the floors only in process)."""
    from flowloader.vision import datasets
    from flowloader.vision import transforms as T

    root = ensure_cifar()
    train = datasets.CIFAR10(root, train=True, transform=cifar_recipe(T))
    uint8 = datasets.CIFAR10(root, train=True, transform=cifar_recipe(T, "uint8"))
    cpu = workers == 0
    sides: dict[str, Callable[[], float]] = {
        "flowloader": lambda: timed(flowloader_loader(train, 128, workers), batches, warmup, cpu),
    }
    if workers:
        sides["flowloader threads"] = lambda: timed(
            flowloader_loader(train, 128, workers, "thread"), batches, warmup
        )
    else:
        sides["flowloader uint8"] = lambda: timed(flowloader_loader(uint8, 128, 0), batches, warmup)
        sides["floor float32"] = lambda: timed(
            floor_batches(train.data, 128, MEAN, STD, np.float32), batches, warmup
        )
        sides["floor uint8"] = lambda: timed(
            floor_batches(train.data, 128, MEAN, STD, np.uint8), batches, warmup
        )
    if have_torchvision():
        from torchvision import transforms as tv1

        v1 = torchvision_cifar(root, cifar_recipe(tv1))
        v2 = torchvision_cifar(root, cifar_v2_recipe())
        # torchvision runs at a few thousand samples/s: fewer batches keep the run short.
        peer_batches = max(batches // 4, 5)
        sides["torchvision v1"] = lambda: timed(
            torch_loader(v1, 128, workers), peer_batches, 2, cpu
        )
        sides["torchvision v2"] = lambda: timed(
            torch_loader(v2, 128, workers), peer_batches, 2, cpu
        )
    if have_kornia() and not workers:
        sides["kornia (batch, CPU)"] = lambda: timed(
            kornia_batches(train.data, 128, MEAN, STD), batches, warmup, True
        )
    return sides


def mnist_sides(batches: int, warmup: int) -> dict[str, Callable[[], float]]:
    """MNIST, ToTensor + Normalize, batch 64, in process."""
    from flowloader.vision import datasets
    from flowloader.vision import transforms as T

    root = ensure_mnist(MNIST_ROOT)
    steps = [T.ToTensor(), T.Normalize(MNIST_MEAN, MNIST_STD)]
    train = datasets.MNIST(root, train=True, transform=T.Compose(steps))
    count = batches * 2  # batches of 64
    sides: dict[str, Callable[[], float]] = {
        "flowloader": lambda: timed(flowloader_loader(train, 64, 0), count, warmup, True),
        "floor float32": lambda: timed(
            floor_batches(train.data, 64, MNIST_MEAN, MNIST_STD, np.float32), count, warmup, True
        ),
    }
    if have_torchvision():
        import torchvision
        from torchvision import transforms as tv1

        v1 = torchvision.datasets.MNIST(
            root,
            train=True,
            transform=tv1.Compose([tv1.ToTensor(), tv1.Normalize(MNIST_MEAN, MNIST_STD)]),
        )
        sides["torchvision v1"] = lambda: timed(torch_loader(v1, 64, 0), max(count // 8, 5), warmup)
    return sides


def mnist_affine_sides(batches: int, warmup: int) -> dict[str, Callable[[], float]]:
    """MNIST with RandomAffine(10, translate=(0.1, 0.1)) + ToTensor + Normalize, batch 64,
    in process."""
    from flowloader.vision import datasets
    from flowloader.vision import transforms as T

    root = ensure_mnist(MNIST_ROOT)

    def recipe(module: Any) -> Any:
        return module.Compose(
            [
                module.RandomAffine(10, translate=(0.1, 0.1)),
                module.ToTensor(),
                module.Normalize(MNIST_MEAN, MNIST_STD),
            ]
        )

    train = datasets.MNIST(root, train=True, transform=recipe(T))
    sides: dict[str, Callable[[], float]] = {
        "flowloader": lambda: timed(flowloader_loader(train, 64, 0), batches, warmup, True),
    }
    if have_torchvision():
        import torchvision
        from torchvision import transforms as tv1

        v1 = torchvision.datasets.MNIST(root, train=True, transform=recipe(tv1))
        sides["torchvision v1"] = lambda: timed(
            torch_loader(v1, 64, 0), max(batches // 4, 5), warmup, True
        )
    return sides


def interleaved(sides: dict[str, Callable[[], float]], runs: int) -> dict[str, list[float]]:
    """Each side ``runs`` times, round by round, each round starting with the next side."""
    results: dict[str, list[float]] = {name: [] for name in sides}
    for number in range(runs):
        for name in rotated(list(sides), number):
            results[name].append(sides[name]())
    return results


RATIOS = [
    ("flowloader", "floor float32", 0.33),
    ("flowloader uint8", "floor uint8", 0.5),
    ("flowloader", "torchvision v1", 10.0),
    ("flowloader", "torchvision v2", None),
    ("flowloader", "kornia (batch, CPU)", None),
    ("flowloader threads", "torchvision v1", 10.0),
]


def summarise(
    title: str, results: dict[str, list[float]], floor_target: float = 0.33
) -> dict[str, Any]:
    """Print the medians and the ratios the issue's targets name (``floor_target``: the
    float32 floor's); return them as a record."""
    medians = {name: median(values) for name, values in results.items()}
    print(f"\n{title}")
    for name, values in results.items():
        shown = ", ".join(f"{v:,.0f}" for v in values)
        print(f"  {name:<20} median {medians[name]:>11,.0f} samples/s   (runs: {shown})")
    ratios = {}
    for mine, other, target in RATIOS:
        if other == "floor float32":
            target = floor_target
        if mine in medians and other in medians:
            ratio = medians[mine] / medians[other]
            ratios[f"{mine} / {other}"] = ratio
            aim = "" if target is None else f"   (target >= {target}x)"
            print(f"  {mine} / {other}: {ratio:.2f}x{aim}")
    return {"title": title, "medians": medians, "runs": results, "ratios": ratios}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="0,2")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--no-mnist", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    print(environment())
    if not have_torchvision():
        print("torchvision is not importable: measuring flowloader and the floors alone")
    records = []
    for workers in (int(w) for w in args.workers.split(",") if w):  # "": MNIST alone
        results = interleaved(cifar_sides(workers, args.batches, args.warmup), args.runs)
        title = f"CIFAR recipe, batch 128, num_workers={workers}"
        records.append(summarise(title, results))
    if not args.no_mnist:
        results = interleaved(mnist_sides(args.batches, args.warmup), args.runs)
        title = "MNIST ToTensor + Normalize, batch 64, in process"
        records.append(summarise(title, results, floor_target=0.5))
        results = interleaved(mnist_affine_sides(args.batches, args.warmup), args.runs)
        title = "MNIST RandomAffine(10, translate=(0.1, 0.1)) + ToTensor + Normalize, batch 64"
        records.append(summarise(title, results))
    write_json(args.json, records)


if __name__ == "__main__":
    main()
