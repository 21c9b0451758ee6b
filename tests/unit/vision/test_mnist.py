"""MNIST / FashionMNIST: layout, strict IDX parsing, the batch fast path, download."""

from __future__ import annotations

import gzip
import hashlib
import os

import numpy as np
import pytest
from PIL import Image

import flowloader as fl
from flowloader.vision import datasets
from flowloader.vision import transforms as T
from flowloader.vision.datasets.idx import IDXError, encode_idx, parse_idx, read_idx

from .serving import serve_directory

MNIST_TRANSFORM = T.Compose([T.ToTensor(), T.Normalize((0.1307,), (0.3081,))])


@pytest.fixture(scope="module")
def mnist_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("mnist"))
    datasets.make_mnist(root, train_size=300, test_size=50)
    return root


def test_layout_and_attributes(mnist_root) -> None:
    train = datasets.MNIST(mnist_root)
    test = datasets.MNIST(mnist_root, train=False)
    assert len(train) == 300
    assert len(test) == 50
    assert train.data.shape == (300, 28, 28)
    assert train.data.dtype == np.uint8
    assert train.targets.dtype == np.int64
    assert train.classes[3] == "3 - three"
    assert train.class_to_idx["9 - nine"] == 9
    image, label = train[0]
    assert isinstance(image, Image.Image)
    assert image.mode == "L"
    assert type(label) is int
    assert "Split: Train" in repr(train)


def test_gzipped_files_are_read_directly(tmp_path) -> None:
    datasets.make_mnist(str(tmp_path), train_size=20, test_size=5, compress=True)
    assert all(name.endswith(".gz") for name in os.listdir(tmp_path / "MNIST" / "raw"))
    assert len(datasets.MNIST(str(tmp_path))) == 20


def test_fashion_mnist_uses_its_own_folder(tmp_path) -> None:
    datasets.make_mnist(str(tmp_path), train_size=10, test_size=2, folder="FashionMNIST")
    fashion = datasets.FashionMNIST(str(tmp_path))
    assert fashion.classes[9] == "Ankle boot"
    assert len(fashion) == 10


def test_missing_dataset_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(RuntimeError, match="download=True"):
        datasets.MNIST(str(tmp_path))


def test_batch_path_is_bit_identical_to_per_sample_path(mnist_root) -> None:
    ds = datasets.MNIST(mnist_root, transform=MNIST_TRANSFORM)
    indices = [5, 0, 299, 17, 17]
    fast = fl.default_collate(ds.__getitems__(indices))
    slow = fl.default_collate([ds[i] for i in indices])
    for a, b in zip(fast, slow, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("seed", [0, 1])
def test_batch_path_with_random_flips_matches_per_sample_draws(mnist_root, seed) -> None:
    def make(rng):
        return T.Compose(
            [T.RandomHorizontalFlip(rng=rng), T.ToTensor(), T.RandomVerticalFlip(p=0.3, rng=rng)]
        )

    indices = list(range(40))
    fast_ds = datasets.MNIST(mnist_root, transform=make(np.random.default_rng(seed)))
    slow_ds = datasets.MNIST(mnist_root, transform=make(np.random.default_rng(seed)))
    fast = fl.default_collate(fast_ds.__getitems__(indices))[0]
    slow = fl.default_collate([slow_ds[i] for i in indices])[0]
    np.testing.assert_array_equal(fast, slow)


def test_batch_path_with_the_global_rng_matches_too(mnist_root) -> None:
    ds = datasets.MNIST(mnist_root, transform=T.Compose([T.RandomHorizontalFlip(), T.ToTensor()]))
    np.random.seed(3)
    fast = fl.default_collate(ds.__getitems__(list(range(30))))[0]
    np.random.seed(3)
    slow = fl.default_collate([ds[i] for i in range(30)])[0]
    np.testing.assert_array_equal(fast, slow)


def test_non_batch_transforms_fall_back_per_sample(mnist_root) -> None:
    lanczos = T.Resize(14, T.InterpolationMode.LANCZOS)  # a filter the batch plan leaves alone
    ds = datasets.MNIST(mnist_root, transform=T.Compose([lanczos, T.ToTensor()]))
    batch = ds.__getitems__([0, 1])
    assert isinstance(batch, list)
    assert batch[0][0].shape == (1, 14, 14)


def test_collated_samples_still_work_with_a_custom_collate_fn(mnist_root) -> None:
    ds = datasets.MNIST(mnist_root, transform=MNIST_TRANSFORM)
    loader = fl.DataLoader(ds, batch_size=4, collate_fn=lambda samples: [s[1] for s in samples])
    assert next(iter(loader)) == [int(t) for t in ds.targets[:4]]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_loader_batches(mnist_root, num_workers) -> None:
    ds = datasets.MNIST(mnist_root, transform=MNIST_TRANSFORM)
    loader = fl.DataLoader(ds, batch_size=64, shuffle=True, num_workers=num_workers, generator=0)
    images, labels = next(iter(loader))
    assert images.shape == (64, 1, 28, 28)
    assert images.dtype == np.float32
    assert labels.dtype == np.int64


def idx_file(tmp_path, data: bytes, name="x-idx3-ubyte"):
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_idx_round_trip() -> None:
    for array in (np.arange(24, dtype=np.uint8).reshape(2, 3, 4), np.array([1.5, -2], ">f4")):
        np.testing.assert_array_equal(parse_idx(encode_idx(array)), array)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"\x00\x00", "too short"),
        (b"\x01\x00\x08\x01" + b"\x00" * 8, "magic number"),
        (b"\x00\x00\x07\x01" + b"\x00" * 8, "data type code 0x07"),
        (b"\x00\x00\x08\x09" + b"\x00" * 40, "9 dimensions"),
        (b"\x00\x00\x08\x03\x00\x00", "truncated header"),
        (encode_idx(np.zeros((10, 28, 28), np.uint8))[:-5], "truncated.*shape \\(10, 28, 28\\)"),
        (encode_idx(np.zeros(3, np.uint8)) + b"xx", "trailing bytes"),
        # A lying header: 2**32-1 x 2**32-1 x 2**32-1 bytes promised; no allocation happens.
        (b"\x00\x00\x08\x03" + b"\xff" * 12 + b"\x00" * 16, "truncated"),
    ],
)
def test_idx_errors_name_the_file_and_the_problem(tmp_path, data, match) -> None:
    path = idx_file(tmp_path, data)
    with pytest.raises(IDXError, match=match) as caught:
        read_idx(path)
    assert path in str(caught.value)


def test_corrupt_gzip_is_an_idx_error(tmp_path) -> None:
    path = idx_file(tmp_path, gzip.compress(encode_idx(np.zeros(9, np.uint8)))[:-6], "x.gz")
    with pytest.raises(IDXError, match="cannot read"):
        read_idx(path)


def test_truncated_dataset_file_fails_at_construction(tmp_path) -> None:
    raw = datasets.make_mnist(str(tmp_path), train_size=10, test_size=2)
    path = os.path.join(raw, "train-images-idx3-ubyte")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 100)
    with pytest.raises(IDXError, match="train-images-idx3-ubyte: truncated"):
        datasets.MNIST(str(tmp_path))


def test_label_count_mismatch(tmp_path) -> None:
    raw = datasets.make_mnist(str(tmp_path), train_size=10, test_size=2)
    with open(os.path.join(raw, "train-labels-idx1-ubyte"), "wb") as f:
        f.write(encode_idx(np.zeros(9, np.uint8)))
    with pytest.raises(IDXError, match="10 images but 9 labels"):
        datasets.MNIST(str(tmp_path))


@pytest.fixture
def mnist_server(tmp_path):
    """A loopback HTTP server serving gzipped MNIST files; yields (url, resources)."""
    source = tmp_path / "served"
    raw = datasets.make_mnist(str(source), train_size=30, test_size=10, compress=True)
    resources = []
    for name in sorted(os.listdir(raw)):
        with open(os.path.join(raw, name), "rb") as f:
            resources.append((name, hashlib.md5(f.read()).hexdigest()))

    with serve_directory(raw) as url:
        yield url, resources


def test_download_from_a_mirror(tmp_path, mnist_server, monkeypatch) -> None:
    url, resources = mnist_server
    monkeypatch.setattr(datasets.MNIST, "mirrors", ["http://127.0.0.1:9/nothing-here/", url])
    monkeypatch.setattr(datasets.MNIST, "resources", resources)
    root = str(tmp_path / "data")
    train = datasets.MNIST(root, download=True)
    assert len(train) == 30
    assert len(datasets.MNIST(root, train=False, download=True)) == 10
    files = sorted(os.listdir(os.path.join(root, "MNIST", "raw")))
    assert "train-images-idx3-ubyte" in files
    assert "train-images-idx3-ubyte.gz" in files


def test_download_with_a_bad_checksum_fails(tmp_path, mnist_server, monkeypatch) -> None:
    url, resources = mnist_server
    monkeypatch.setattr(datasets.MNIST, "mirrors", [url])
    monkeypatch.setattr(datasets.MNIST, "resources", [(n, "0" * 32) for n, _ in resources])
    with pytest.raises(RuntimeError, match="md5 does not match"):
        datasets.MNIST(str(tmp_path / "data"), download=True)
