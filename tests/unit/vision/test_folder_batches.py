"""DatasetFolder.__getitems__: images normalised straight into the batch array, bit-identical
to loading them one by one, with the one-by-one path wherever the batch array cannot hold them."""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

import flowloader as fl
from flowloader.batching import CollatedSamples
from flowloader.vision import datasets
from flowloader.vision import transforms as T

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class OneByOne(fl.Dataset):
    """The same dataset without __getitems__: the loader takes samples one at a time."""

    def __init__(self, ds) -> None:
        self.ds = ds

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, i):
        return self.ds[i]


@pytest.fixture(scope="module")
def photos(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("photos"))
    datasets.make_image_folder(root, num_classes=2, images_per_class=6, size=(160, 120))
    return root


PIPELINES = {
    "train": lambda: T.Compose(
        [T.RandomResizedCrop(64), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)]
    ),
    "val": lambda: T.Compose(
        [T.Resize(72), T.CenterCrop(64), T.ToTensor(), T.Normalize(MEAN, STD)]
    ),
    "only-normalise": lambda: T.Compose([T.ToTensor(), T.Normalize(MEAN, STD)]),
    "crop-flip-erase": lambda: T.Compose(
        [
            T.RandomCrop(100, padding=4, padding_mode="reflect"),
            T.RandomHorizontalFlip(),
            T.ToTensor(),
            T.Normalize(MEAN, STD),
            T.RandomErasing(value=0.5),
        ]
    ),
}


def batches(ds, num_workers: int) -> list[tuple[bytes, bytes]]:
    loader = fl.DataLoader(
        ds, batch_size=5, shuffle=True, num_workers=num_workers, generator=np.random.default_rng(3)
    )
    return [(images.tobytes(), labels.tobytes()) for images, labels in loader]


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_batches_are_bit_identical_to_one_by_one(photos, pipeline, num_workers) -> None:
    ds = datasets.ImageFolder(photos, transform=PIPELINES[pipeline]())
    assert batches(ds, num_workers) == batches(OneByOne(ds), num_workers)


def test_getitems_gives_columns_that_rebuild_each_sample(photos) -> None:
    ds = datasets.ImageFolder(photos, transform=PIPELINES["val"]())
    got = ds.__getitems__([3, 0, 7])
    assert isinstance(got, CollatedSamples)
    images, targets = got.collated()
    assert images.shape == (3, 3, 64, 64)
    assert images.dtype == np.float32
    assert targets.tolist() == [ds.targets[3], ds.targets[0], ds.targets[7]]
    for k, index in enumerate([3, 0, 7]):
        image, target = got[k]  # what a custom collate_fn sees
        expected, expected_target = ds[index]
        np.testing.assert_array_equal(image, expected)
        assert target == expected_target


def test_a_custom_collate_fn_sees_ordinary_samples(photos) -> None:
    ds = datasets.ImageFolder(photos, transform=PIPELINES["val"]())
    loader = fl.DataLoader(ds, batch_size=4, collate_fn=lambda samples: samples)
    first = next(iter(loader))
    assert [target for _, target in first] == [ds[i][1] for i in range(4)]
    np.testing.assert_array_equal(first[2][0], ds[2][0])


def test_decoded_images_of_one_size_go_through_the_batch_plan(photos) -> None:
    ds = datasets.ImageFolder(photos, transform=PIPELINES["crop-flip-erase"]())
    rngs = fl.SampleRngs(fl.SampleSeeds(4), [3, 0, 7])
    batch = ds.__getitems__([3, 0, 7], rngs)
    assert isinstance(batch, CollatedSamples)
    assert not ds._sizes_vary
    one_by_one = fl.batching.load_one_by_one(OneByOne(ds), [3, 0, 7], rngs)
    assert batch.columns[0].tobytes() == np.stack([image for image, _ in one_by_one]).tobytes()


def test_images_of_different_sizes_fall_back_to_separate_samples(tmp_path) -> None:
    (tmp_path / "a").mkdir()
    for i, size in enumerate([(20, 10), (20, 10), (30, 12), (20, 10)]):
        Image.new("RGB", size, (i * 40, 9, 200)).save(tmp_path / "a" / f"{i}.png")
    ds = datasets.ImageFolder(str(tmp_path), transform=PIPELINES["only-normalise"]())
    got = ds.__getitems__([0, 1, 2, 3])
    assert isinstance(got, list)
    for (image, target), index in zip(got, range(4), strict=True):
        np.testing.assert_array_equal(image, ds[index][0])
        assert target == 0
    assert not np.shares_memory(got[0][0], got[1][0])
    assert ds._sizes_vary  # the batch plan is not tried again for this dataset
    assert not datasets.ImageFolder(str(tmp_path))._sizes_vary


def test_float_images_take_the_one_by_one_path(tmp_path) -> None:
    (tmp_path / "a").mkdir()
    for i in range(2):
        pixels = np.full((8, 8), 0.25 * (i + 1), np.float32)  # mode "F": not 8-bit
        Image.fromarray(pixels).save(tmp_path / "a" / f"{i}.tiff")
    ds = datasets.ImageFolder(
        str(tmp_path),
        loader=Image.open,
        transform=T.Compose([T.ToTensor(), T.Normalize((0.5,), (0.5,))]),
    )
    got = ds.__getitems__([0, 1])
    assert isinstance(got, list)
    np.testing.assert_array_equal(got[1][0], ds[1][0])


def test_a_target_transform_takes_the_one_by_one_path(photos) -> None:
    ds = datasets.ImageFolder(
        photos, transform=PIPELINES["val"](), target_transform=lambda t: t + 10
    )
    got = ds.__getitems__([0, 11])
    assert isinstance(got, list)
    assert [t for _, t in got] == [10, 11]


class WithPaths(datasets.ImageFolder):
    """The common torchvision idiom: a subclass that also returns each file's path."""

    def __getitem__(self, index):
        image, target = super().__getitem__(index)
        return image, target, self.samples[index][0]


def test_a_subclass_overriding_getitem_keeps_its_samples(photos) -> None:
    ds = WithPaths(photos, transform=PIPELINES["val"]())
    images, targets, paths = next(iter(fl.DataLoader(ds, batch_size=3)))
    assert images.shape == (3, 3, 64, 64)
    assert targets.tolist() == [ds.targets[i] for i in range(3)]
    assert list(paths) == [ds.samples[i][0] for i in range(3)]


def test_an_mnist_subclass_overriding_getitem_keeps_its_samples(tmp_path) -> None:
    class Indexed(datasets.MNIST):
        def __getitem__(self, index):
            return (*super().__getitem__(index), index)

    datasets.make_mnist(str(tmp_path), train_size=20, test_size=10)
    (tmp_path / "Indexed").symlink_to(tmp_path / "MNIST")  # torchvision: root/<class name>/raw
    ds = Indexed(str(tmp_path), transform=T.Compose([T.ToTensor(), T.Normalize((0.1,), (0.3,))]))
    images, targets, indices = next(iter(fl.DataLoader(ds, batch_size=4)))
    assert images.shape == (4, 1, 28, 28)
    assert targets.tolist() == ds.targets[:4].tolist()
    assert indices.tolist() == [0, 1, 2, 3]


def val_folder(root: str) -> datasets.ImageFolder:
    return datasets.ImageFolder(
        root, transform=T.Compose([T.CenterCrop(24), T.ToTensor(), T.Normalize(MEAN, STD)])
    )


def test_a_read_ahead_that_raises_leaves_each_sample_to_read_its_file(photos, monkeypatch) -> None:
    """A batch's files read together (native.read_files) raising part-way: the samples read
    their own files, and the batch is the same."""
    expected = next(iter(fl.DataLoader(val_folder(photos), batch_size=6)))
    from flowloader.vision.datasets import folder

    def fails(paths, limit):
        raise MemoryError("")

    monkeypatch.setattr(folder.native, "read_files", fails)
    got = next(iter(fl.DataLoader(val_folder(photos), batch_size=6)))
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])


@pytest.mark.skipif(
    open("/proc/sys/vm/overcommit_memory").read().strip() != "0",  # noqa: SIM115
    reason="a 64 GiB allocation must be refused (heuristic overcommit)",
)
def test_a_file_too_big_to_read_is_an_error_naming_the_sample(tmp_path) -> None:
    """A 64 GiB sparse .jpg in a batch (shared/REVIEW-WAVE4.md R11): the error names the
    sample and its path, as ds[i] does, not a bare MemoryError."""
    root = tmp_path / "photos"
    datasets.make_image_folder(str(root), num_classes=1, images_per_class=3, size=(40, 30))
    huge = next(root.iterdir()) / "zz_huge.jpg"
    with open(huge, "wb") as stream:
        stream.truncate(64 << 30)
    if os.stat(huge).st_blocks > 1024:
        pytest.skip("this filesystem has no sparse files")
    ds = val_folder(str(root))
    with pytest.raises(Exception, match=r"sample 3 .*zz_huge\.jpg") as single:
        ds[3]
    with pytest.raises(type(single.value), match=r"sample 3 .*zz_huge\.jpg"):
        next(iter(fl.DataLoader(ds, batch_size=4)))
