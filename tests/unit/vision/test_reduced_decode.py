"""The Pillow path's planned first steps in DatasetFolder (reduced-scale JPEG decoding, and
with it Resize + CenterCrop in one call), as it runs where the native kernel is not built:
bounded difference, exact where no reduction applies, the same random draws as the plain
path, and an off switch. (The native kernel's numerics: test_native_kernel.py.)"""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from flowloader.vision import datasets
from flowloader.vision import transforms as T

# Stated bounds (ToTensor units, [0, 1]); measured on 2048x1536 photos: mean 0.004, p99 0.016.
MEAN_BOUND, P99_BOUND = 0.01, 0.04


@pytest.fixture(autouse=True)
def pillow_path(monkeypatch):
    monkeypatch.setenv("FLOWLOADER_NATIVE", "0")


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("large"))
    datasets.make_image_folder(root, num_classes=1, images_per_class=6, size=(1200, 900))
    return root


def train(rng):
    return T.Compose(
        [T.RandomResizedCrop(128, rng=rng), T.RandomHorizontalFlip(rng=rng), T.ToTensor()]
    )


def val(rng=None):
    return T.Compose([T.Resize(144), T.CenterCrop(128), T.ToTensor()])


@pytest.mark.parametrize("make", [train, val])
def test_difference_from_full_decoding_is_bounded(large, make) -> None:
    fast_rng, exact_rng = np.random.default_rng(0), np.random.default_rng(0)
    fast = datasets.ImageFolder(large, transform=make(fast_rng))
    exact = datasets.ImageFolder(large, transform=make(exact_rng), reduced_decode=False)
    a = np.stack([fast[i][0] for i in range(len(fast))])
    b = np.stack([exact[i][0] for i in range(len(exact))])
    assert a.shape == b.shape
    difference = np.abs(a - b)
    assert 0 < difference.mean() <= MEAN_BOUND
    assert np.quantile(difference, 0.99) <= P99_BOUND
    # The same random draws were made (same crops, same flips).
    assert fast_rng.random() == exact_rng.random()


def resize_only(rng=None):
    return T.Compose([T.Resize(144), T.ToTensor()])


def crop_larger_than_resize(rng=None):
    return T.Compose([T.Resize(120), T.CenterCrop(130), T.ToTensor()])  # pads


def pair(root: str, make) -> tuple[datasets.ImageFolder, datasets.ImageFolder]:
    fast = datasets.ImageFolder(root, transform=make(np.random.default_rng(1)))
    exact = datasets.ImageFolder(
        root, transform=make(np.random.default_rng(1)), reduced_decode=False
    )
    return fast, exact


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("small"))
    datasets.make_image_folder(root, num_classes=1, images_per_class=4, size=(200, 150))
    return root


@pytest.mark.parametrize("make", [train, resize_only, crop_larger_than_resize])
def test_exact_when_no_reduction_applies(small, make) -> None:
    fast, exact = pair(small, make)
    for i in range(len(fast)):
        np.testing.assert_array_equal(fast[i][0], exact[i][0])


def test_resize_then_center_crop_is_exact_without_a_reduction(tmp_path) -> None:
    """On ImageNet-sized files no reduction applies, and the plain steps run."""
    datasets.make_image_folder(str(tmp_path), num_classes=1, images_per_class=3, size=(500, 375))
    fast, exact = pair(
        str(tmp_path), lambda rng: T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor()])
    )
    for i in range(len(fast)):
        np.testing.assert_array_equal(fast[i][0], exact[i][0])


def test_other_formats_use_the_plain_path(tmp_path) -> None:
    (tmp_path / "c").mkdir()
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (600, 800, 3), np.uint8)).save(
        tmp_path / "c" / "x.png"
    )
    fast = datasets.ImageFolder(str(tmp_path), transform=val())
    exact = datasets.ImageFolder(str(tmp_path), transform=val(), reduced_decode=False)
    np.testing.assert_array_equal(fast[0][0], exact[0][0])


def test_corrupt_jpeg_still_names_path_and_index(tmp_path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "bad.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    ds = datasets.ImageFolder(str(tmp_path), transform=val())
    with pytest.raises(OSError, match=r"cannot load sample 0 from .*bad\.jpg"):
        ds[0]
