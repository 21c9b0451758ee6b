"""output="torch" / "jax": the pipeline's last step hands out framework arrays."""

from __future__ import annotations

import numpy as np
import pytest

import flowloader as fl
from flowloader.batching import CollatedSamples

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


class Stacked(fl.Dataset):
    """__getitems__ returns ready columns, so the batch arrays are exactly these objects."""

    def __init__(self) -> None:
        self.images = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)
        self.labels = np.arange(8, dtype=np.int64)
        self.last: list = []

    def __len__(self) -> int:
        return 8

    def __getitems__(self, indices):
        columns = (self.images[indices], self.labels[indices])
        self.last = list(columns)
        return CollatedSamples(columns, lambda i: (columns[0][i], int(columns[1][i])))


def test_torch_output_is_zero_copy() -> None:
    ds = Stacked()
    images, labels = next(iter(fl.DataLoader(ds, batch_size=4, output="torch")))
    assert isinstance(images, torch.Tensor)
    assert images.dtype == torch.float32
    assert labels.dtype == torch.int64
    assert tuple(images.shape) == (4, 3)
    assert images.data_ptr() == ds.last[0].ctypes.data  # the same memory, not a copy


@pytest.mark.parametrize("num_workers", [0, 2])
def test_torch_output_keeps_structure_and_values(num_workers) -> None:
    samples = [{"x": np.full((2, 2), i, np.float32), "y": i, "name": f"s{i}"} for i in range(6)]
    batch = next(
        iter(fl.DataLoader(samples, batch_size=3, num_workers=num_workers, output="torch"))
    )
    assert isinstance(batch["x"], torch.Tensor)
    assert batch["y"].tolist() == [0, 1, 2]
    assert batch["name"] == ["s0", "s1", "s2"]
    assert batch["x"][2, 0, 0].item() == 2.0


def test_tensors_from_workers_view_shared_memory() -> None:
    samples = [np.full(1000, i, np.float32) for i in range(8)]
    iterator = iter(fl.DataLoader(samples, batch_size=4, num_workers=1, output="torch"))
    first = next(iterator)
    first.add_(1)  # writable, and the loader hands it over: nobody else uses it
    assert first[0, 0].item() == 1.0
    assert [b[0, 0].item() for b in iterator] == [4.0]


def test_pin_memory_without_cuda_warns() -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA is available: pinning is checked on the GPU machine")
    with pytest.warns(UserWarning, match="pin_memory=True has no effect"):
        batch = next(iter(fl.DataLoader(Stacked(), batch_size=4, output="torch", pin_memory=True)))
    assert not batch[0].is_pinned()


def test_unknown_output_is_refused() -> None:
    with pytest.raises(ValueError, match="output should be one of"):
        fl.DataLoader(Stacked(), output="tensorflow")


@pytest.mark.parametrize("num_workers", [0, 2])
def test_pin_memory_gives_pinned_tensors_with_cuda(num_workers) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    samples = [(np.full((3, 8, 8), i, np.float32), i) for i in range(8)]
    loader = fl.DataLoader(
        samples, batch_size=4, num_workers=num_workers, output="torch", pin_memory=True
    )
    for images, labels in loader:
        assert images.is_pinned()
        assert labels.is_pinned()
        on_gpu = images.cuda(non_blocking=True)
        torch.cuda.synchronize()
        assert on_gpu.device.type == "cuda"
        assert float(on_gpu[0, 0, 0, 0]) == float(images[0, 0, 0, 0])


def test_pinned_blocks_are_reused_with_cuda() -> None:
    """A steady epoch recycles freed page-locked blocks instead of allocating one per batch."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    samples = [np.full((3, 64, 64), i, np.float32) for i in range(64)]
    loader = fl.DataLoader(samples, batch_size=4, num_workers=2, output="torch", pin_memory=True)
    addresses = [batch.data_ptr() for batch in loader]  # each batch is dropped at once
    assert len(addresses) == 16
    assert len(set(addresses)) <= 6
