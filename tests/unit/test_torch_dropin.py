"""``flowloader.utils.data`` is torch.utils.data's drop-in, and ``import flowloader`` reaches
its public subpackages without their own import statement."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import subprocess
import sys
import typing

import numpy as np
import pytest

import flowloader as fl

HAS_TORCH = importlib.util.find_spec("torch") is not None


def run_fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def test_subpackages_are_attributes_of_a_plain_import() -> None:
    done = run_fresh(
        "import sys, flowloader as fl\n"
        "assert 'flowloader.vision' not in sys.modules and 'PIL' not in sys.modules\n"
        "assert fl.vision.datasets.MNIST and fl.vision.transforms.ToTensor\n"
        "assert issubclass(fl.utils.data.DistributedSampler, fl.DistributedSampler)\n"
        "assert {'utils', 'vision'} <= set(dir(fl))\n"
    )
    assert done.returncode == 0, done.stderr
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        _ = fl.nonexistent


@pytest.mark.parametrize(
    ("module", "names"),
    [
        ("flowloader.utils.data.distributed", ["DistributedSampler"]),
        (
            "flowloader.utils.data.sampler",
            [
                "Sampler",
                "SequentialSampler",
                "RandomSampler",
                "SubsetRandomSampler",
                "WeightedRandomSampler",
                "BatchSampler",
            ],
        ),
        (
            "flowloader.utils.data.dataset",
            [
                "Dataset",
                "IterableDataset",
                "TensorDataset",
                "StackDataset",
                "ConcatDataset",
                "ChainDataset",
                "Subset",
                "random_split",
            ],
        ),
        (
            "flowloader.utils.data.dataloader",
            ["DataLoader", "default_collate", "default_convert", "get_worker_info"],
        ),
    ],
)
def test_submodules_have_pytorchs_paths(module, names) -> None:
    imported = importlib.import_module(module)
    data = importlib.import_module("flowloader.utils.data")
    for name in names:
        assert getattr(imported, name) is getattr(data, name), f"{module}.{name}"
    assert getattr(data, module.rsplit(".", 1)[1]) is imported  # torch.utils.data.sampler...


def test_the_dropin_signature_is_pytorchs_with_torch_output() -> None:
    from flowloader.utils.data import DataLoader

    ours = inspect.signature(DataLoader)
    parent = inspect.signature(fl.DataLoader)
    assert list(ours.parameters) == list(parent.parameters)
    assert ours.parameters["output"].default == "torch"
    assert parent.parameters["output"].default == "numpy"


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch")
@pytest.mark.parametrize("num_workers", [0, 2])
def test_the_dropin_loader_hands_out_tensors(num_workers) -> None:
    import torch

    from flowloader.utils.data import DataLoader, TensorDataset

    data = TensorDataset(np.arange(12, dtype=np.float32).reshape(6, 2), np.arange(6))
    batches = list(DataLoader(data, batch_size=4, num_workers=num_workers))
    (x, y), (x2, _) = batches
    assert isinstance(x, torch.Tensor)
    assert isinstance(y, torch.Tensor)
    assert x.dtype == torch.float32
    assert y.dtype == torch.int64
    assert x.shape == (4, 2)
    assert x2.shape == (2, 2)
    assert torch.equal(y, torch.arange(4))
    numpy_batch = next(iter(fl.DataLoader(data, batch_size=4)))
    assert isinstance(numpy_batch[0], np.ndarray)  # the top-level loader stays NumPy-first
    assert isinstance(next(iter(DataLoader(data, batch_size=4, output="numpy")))[0], np.ndarray)


def test_the_dropin_loader_without_torch_names_the_numpy_loader() -> None:
    # torch is blocked in a fresh interpreter (or simply missing, in the torch-free CI run).
    done = run_fresh(
        "import sys; sys.modules['torch'] = None\n"
        "import flowloader as fl\n"
        "from flowloader.utils.data import DataLoader\n"
        "try:\n"
        "    DataLoader(range(4))\n"
        "except ImportError as error:\n"
        "    print(error)\n"
        "print(type(next(iter(DataLoader(range(4), output='numpy')))).__name__)\n"
        "print(type(next(iter(fl.DataLoader(range(4))))).__name__)\n"
    )
    assert done.returncode == 0, done.stderr
    message, dropin_numpy, top_level = done.stdout.strip().splitlines()
    assert "torch is not installed" in message
    assert "flowloader.DataLoader" in message
    assert dropin_numpy == top_level == "ndarray"


def test_the_drop_in_loader_is_generic_like_torchs() -> None:
    from flowloader.utils.data import DataLoader

    alias = DataLoader[list]  # what `-> DataLoader[List[Tensor]]` annotations evaluate
    assert typing.get_origin(alias) is DataLoader  # None for anything but a generic alias
    assert typing.get_args(alias) == (list,)


class ShardedTorchStream:
    """Made on first use: a torch.utils.data.IterableDataset that shards itself with
    get_worker_info() (the drop-in's, as a ported script calls it)."""

    @staticmethod
    def make(n: int):
        import torch.utils.data

        class Stream(torch.utils.data.IterableDataset):
            def __iter__(self):
                info = fl.utils.data.get_worker_info()
                start, step = (0, 1) if info is None else (info.id, info.num_workers)
                return iter(range(start, n, step))

        return Stream()


@pytest.mark.torch
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_torch_iterable_dataset_is_read_as_a_stream(num_workers) -> None:
    stream = ShardedTorchStream.make(10)
    loader = fl.DataLoader(stream, batch_size=4, num_workers=num_workers)
    samples = sorted(int(x) for batch in loader for x in batch)
    assert samples == list(range(10))
    chained = fl.ChainDataset([stream, ShardedTorchStream.make(3)])
    assert [int(x) for x in chained] == [*range(10), 0, 1, 2]
    with pytest.raises(AssertionError, match="ConcatDataset does not support IterableDataset"):
        fl.ConcatDataset([stream])
