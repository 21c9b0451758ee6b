"""Datasets for the multi-process tests (module-level so that spawn can pickle them). Not
named datasets.py: the scripts run from this folder (accelerate_ranks.py, ...) have it on
sys.path, and Accelerate and Lightning import Hugging Face's `datasets` when it is installed."""

from __future__ import annotations

import os
import random
import signal
import sys
import time

import numpy as np

import flowloader as fl


class Arrays(fl.Dataset):
    """Sample i: a float32 image filled with i, its label, a name and a nested dict."""

    def __init__(self, n: int = 23, delay_s: float = 0.0) -> None:
        self.n, self.delay_s = n, delay_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if self.delay_s:
            time.sleep(random.random() * self.delay_s)
        return {
            "image": np.full((3, 4, 5), i, dtype=np.float32),
            "label": i,
            "name": f"sample-{i}",
            "extra": (np.int16(i), [np.arange(i % 3 + 1)[:1] * 2.0]),
        }


class Stream(fl.IterableDataset):
    """0..n-1, sharded across workers by get_worker_info() as PyTorch's docs show."""

    def __init__(self, n: int = 20, shard: bool = True) -> None:
        self.n, self.shard = n, shard

    def __iter__(self):
        info = fl.get_worker_info()
        if info is None or not self.shard:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))

    def __len__(self) -> int:
        return self.n


class Failing(fl.Dataset):
    """Sample ``bad`` misbehaves in the way ``how`` says; the rest are fine."""

    def __init__(self, how: str, bad: int = 5, n: int = 16) -> None:
        self.how, self.bad, self.n = how, bad, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if i == self.bad:
            if self.how == "exception":
                raise ValueError(f"cannot decode sample {i}")
            if self.how == "keyerror":
                raise KeyError(i)
            if self.how == "unbuildable":
                raise NeedsTwoArguments("a", "b")
            if self.how == "base-exception":
                raise Escaping("not an Exception: escapes the worker loop")
            if self.how == "sys.exit":
                sys.exit(3)
            if self.how == "os._exit":
                os._exit(7)
            if self.how == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            if self.how == "segfault":
                import ctypes
                import faulthandler

                faulthandler.disable()  # pytest's dump of every thread would flood the log
                ctypes.string_at(0)
            if self.how == "hang":
                time.sleep(60)
        return np.float32(i)


class Escaping(BaseException):
    pass


class NeedsTwoArguments(Exception):
    def __init__(self, first: str, second: str) -> None:
        super().__init__(first, second)


class RandomDraws(fl.Dataset):
    """Each sample draws from the global RNGs (as legacy augmentation code does)."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int):
        return np.array([random.random(), np.random.rand()]), fl.get_worker_info().seed


class TorchDraws(fl.Dataset):
    """Each sample draws from torch's global RNG (needs torch)."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int):
        import torch

        return float(torch.rand(1))


def record_worker_id(worker_id: int) -> None:
    os.environ["FLOWLOADER_TEST_WORKER"] = str(worker_id)


def failing_init(worker_id: int) -> None:
    raise RuntimeError(f"init failed in {worker_id}")


class Augmented(fl.Dataset):
    """Sample i carries draws from its own generator (flowloader.sample_rng())."""

    def __init__(self, n: int = 23) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        rng = fl.sample_rng()
        noise = rng.integers(0, 1 << 30, 2) if rng is not None else np.zeros(2, np.int64)
        return np.concatenate([[i], noise]).astype(np.int64)


class TorchThreads(fl.Dataset):
    """Sample i: torch's intra-op thread count where the sample is loaded (needs torch)."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int):
        import torch

        return torch.get_num_threads()


class TorchTensors(fl.Dataset):
    """Sample i: a float32 (3, 8, 8) tensor filled with i, an int64 label tensor and an int
    (needs torch), like a custom torch-based dataset."""

    def __len__(self) -> int:
        return 10

    def __getitem__(self, i: int):
        import torch

        return torch.full((3, 8, 8), float(i)), torch.tensor(i), i


def set_two_torch_threads(worker_id: int) -> None:
    import torch

    torch.set_num_threads(2)


class CrashAt(Failing):
    """``Failing``, where the samples in ``slow`` take 50 ms: the other worker is still busy
    with an earlier batch when the crash comes."""

    def __init__(self, how: str, bad: int, slow: tuple[int, ...], n: int = 16) -> None:
        super().__init__(how, bad, n)
        self.slow = slow

    def __getitem__(self, i: int):
        if i in self.slow:
            time.sleep(0.05)
        return super().__getitem__(i)


def failing_init_in_worker_0(worker_id: int) -> None:
    if worker_id == 0:
        raise RuntimeError(f"init failed in {worker_id}")


class SomeBad(fl.Dataset):
    """Sample i is i as float32, except the ``bad`` ones, whose load raises ValueError (or
    ``error``); with ``batch_path`` a ``__getitems__`` that fails whole if one is bad."""

    def __init__(self, bad=(3, 4, 5, 11), n: int = 20, error: type = ValueError) -> None:
        self.bad, self.n, self.error = set(bad), n, error

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if i in self.bad:
            raise self.error(f"bad sample {i}")
        return np.float32(i)


class SomeBadBatches(SomeBad):
    def __getitems__(self, indices):
        if self.bad.intersection(indices):
            raise self.error(f"a bad sample among {indices}")
        return [np.float32(i) for i in indices]


class BadItemsStream(fl.IterableDataset):
    """Items 0..n-1 of a stream split over workers; items in ``bad`` raise, and the stream
    goes on (an iterator object, not a generator)."""

    def __init__(self, n: int = 24, bad=(2, 9, 10)) -> None:
        self.n, self.bad = n, set(bad)

    def __iter__(self):
        return _BadItemsIterator(iter(fl.shard_stream(range(self.n))), self.bad)


class _BadItemsIterator:
    def __init__(self, items, bad) -> None:
        self.items, self.bad = items, bad

    def __iter__(self):
        return self

    def __next__(self):
        item = next(self.items)
        if item in self.bad:
            raise ValueError(f"bad item {item}")
        return np.float32(item)
