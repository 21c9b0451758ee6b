"""Datasets the Ray tests send to actors. Pickled by value (conftest.py registers this
module with Ray's cloudpickle): the actors need not import the tests package."""

from __future__ import annotations

import threading
import time

import numpy as np

import flowloader as fl


class Noisy(fl.Dataset):
    """Sample i: an image-like array with draws from its own generator, and i. The same for
    any worker count and transport only if every sample's generator is."""

    def __init__(self, n: int = 96, delay_s: float = 0.0, side: int = 16) -> None:
        self.n, self.delay_s, self.side = n, delay_s, side

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict:
        if self.delay_s:
            time.sleep(self.delay_s)
        rng = fl.sample_rng()
        image = rng.random((3, self.side, self.side), dtype=np.float32)
        return {"image": image, "index": np.int64(i)}


class Large(fl.Dataset):
    """Samples of 256 KiB: batches that go through the object store (not inlined)."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> np.ndarray:
        return np.full((256, 256), i, dtype=np.float32)


class FailsAt(fl.Dataset):
    def __init__(self, bad: int) -> None:
        self.bad = bad

    def __len__(self) -> int:
        return 32

    def __getitem__(self, i: int) -> np.int64:
        if i == self.bad:
            raise ValueError(f"sample {i} is corrupt")
        return np.int64(i)


class WhereLoaded(fl.Dataset):
    """Sample i: the node and worker that loaded it (get_worker_info)."""

    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> tuple[str, int, str]:
        info = fl.get_worker_info()
        return (info.node_id, info.id, info.worker_method)


class Stream(fl.IterableDataset):
    """Each worker streams its own share of range(n) (get_worker_info)."""

    def __init__(self, n: int = 40) -> None:
        self.n = n

    def __iter__(self):
        info = fl.get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(np.int64(i) for i in range(start, self.n, step))


class Unpicklable(fl.Dataset):
    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> int:
        return i


class Sleeps(fl.Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> int:
        time.sleep(30)
        return i


def _cannot_be_rebuilt() -> None:
    raise ModuleNotFoundError("No module named 'only_on_the_driver'")


class Unrebuildable(fl.Dataset):
    """Pickles on the driver, but cannot be rebuilt on the actors' nodes (a module that is
    only on the driver, a version that differs)."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> int:
        return i

    def __reduce__(self):
        return (_cannot_be_rebuilt, ())


class WritesItsCache(fl.Dataset):
    """Fills an array of its own as it loads (a cache): the dataset's arrays must be the
    worker's own, writable, as in a worker process."""

    def __init__(self) -> None:
        self.cache = np.zeros(16, dtype=np.int64)

    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> np.int64:
        self.cache[i] = i
        return np.int64(self.cache[: i + 1].sum())


def lock_in_batch_4(samples: list) -> dict:
    """A collate_fn whose batch 4 holds a lock, which cannot be pickled."""
    batch = {"x": np.stack(samples)}
    if int(samples[0]) == 16:
        batch["lock"] = threading.Lock()
    return batch
