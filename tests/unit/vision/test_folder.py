"""DatasetFolder / ImageFolder: torchvision's discovery rules, compact storage, clear errors."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
from PIL import Image, UnidentifiedImageError

import flowloader as fl
from flowloader.vision import datasets
from flowloader.vision import transforms as T


@pytest.fixture
def tree(tmp_path):
    """root/cat/{a.jpg, b.png, notes.txt}, root/dog/{sub/c.jpeg}, root/empty/."""
    for rel in ("cat/a.jpg", "cat/b.png", "dog/sub/c.jpeg"):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (8, 6), (len(rel), 0, 0)).save(path)
    (tmp_path / "cat" / "notes.txt").write_text("not an image")
    (tmp_path / "empty").mkdir()
    return tmp_path


def test_find_classes(tree) -> None:
    assert datasets.find_classes(tree) == (
        ["cat", "dog", "empty"],
        {"cat": 0, "dog": 1, "empty": 2},
    )


def test_find_classes_without_folders(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="Couldn't find any class folder"):
        datasets.find_classes(tmp_path)


def test_make_dataset_rules(tree) -> None:
    samples = datasets.make_dataset(
        str(tree), {"cat": 0, "dog": 1}, extensions=datasets.IMG_EXTENSIONS
    )
    assert [(os.path.relpath(p, tree), c) for p, c in samples] == [
        ("cat/a.jpg", 0),
        ("cat/b.png", 0),
        ("dog/sub/c.jpeg", 1),
    ]
    with pytest.raises(ValueError, match="Both extensions and is_valid_file"):
        datasets.make_dataset(str(tree), {"cat": 0})
    with pytest.raises(ValueError, match="Both extensions and is_valid_file"):
        datasets.make_dataset(str(tree), {"cat": 0}, (".jpg",), lambda p: True)
    with pytest.raises(ValueError, match="at least one entry"):
        datasets.make_dataset(str(tree), {}, (".jpg",))


def test_image_folder_refuses_empty_classes_unless_allowed(tree) -> None:
    with pytest.raises(FileNotFoundError, match="no valid file for the classes empty"):
        datasets.ImageFolder(str(tree))
    ds = datasets.ImageFolder(str(tree), allow_empty=True)
    assert ds.classes == ["cat", "dog", "empty"]
    assert len(ds) == 3
    assert ds.targets == [0, 0, 1]
    assert ds.imgs is ds.samples
    assert ds.samples[2] == (os.path.join(str(tree), "dog", "sub", "c.jpeg"), 1)
    assert [c for _, c in ds.samples] == [0, 0, 1]
    image, target = ds[0]
    assert image.mode == "RGB"
    assert target == 0


def test_is_valid_file(tree) -> None:
    ds = datasets.ImageFolder(
        str(tree), is_valid_file=lambda p: p.endswith(".txt"), allow_empty=True
    )
    assert [os.path.basename(p) for p, _ in ds.samples] == ["notes.txt"]


def test_dataset_folder_with_a_custom_loader(tree) -> None:
    ds = datasets.DatasetFolder(
        str(tree), loader=os.path.getsize, extensions=(".txt",), allow_empty=True
    )
    assert ds[0] == (len("not an image"), 0)


def test_samples_are_stored_compactly_and_can_be_reassigned(tree) -> None:
    ds = datasets.ImageFolder(str(tree), allow_empty=True)
    table = ds.samples
    assert isinstance(table.blob, np.ndarray)
    assert isinstance(table.targets, np.ndarray)
    ds.samples = [s for s in ds.samples if s[1] == 1]  # the usual torchvision idiom
    assert len(ds) == 1
    ds.targets = [2]
    assert ds.samples[0][1] == 2
    with pytest.raises(ValueError, match="expected 1 targets"):
        ds.targets = [0, 1]
    restored = pickle.loads(pickle.dumps(ds))
    assert restored.samples == ds.samples


def test_non_ascii_paths(tmp_path) -> None:
    path = tmp_path / "kätzchen" / "bild-ß.png"
    path.parent.mkdir()
    Image.new("RGB", (4, 4)).save(path)
    ds = datasets.ImageFolder(str(tmp_path))
    assert ds.samples[0][0] == str(path)


@pytest.mark.parametrize(
    ("content", "error"),
    [(b"this is not an image", UnidentifiedImageError), (None, OSError)],
)
def test_corrupt_image_names_path_and_index(tree, content, error) -> None:
    bad = tree / "dog" / "sub" / "c.jpeg"
    data = bad.read_bytes()
    bad.write_bytes(content if content is not None else data[: len(data) // 2])
    ds = datasets.ImageFolder(str(tree), allow_empty=True)
    with pytest.raises(error, match=rf"cannot load sample 2 from {bad}"):
        ds[2]


def test_corrupt_image_in_a_worker_names_path_and_index(tree) -> None:
    (tree / "cat" / "b.png").write_bytes(b"garbage")
    ds = datasets.ImageFolder(str(tree), transform=T.ToTensor(), allow_empty=True)
    loader = fl.DataLoader(ds, batch_size=None, num_workers=1)
    with pytest.raises(
        UnidentifiedImageError, match=r"cannot load sample 1 from .*b\.png"
    ) as caught:
        list(loader)
    assert "dataset indices 1" in str(caught.value)


def test_image_folder_through_the_loader(tmp_path) -> None:
    datasets.make_image_folder(str(tmp_path), num_classes=2, images_per_class=3, size=(40, 30))
    ds = datasets.ImageFolder(
        str(tmp_path),
        transform=T.Compose([T.RandomResizedCrop(16), T.RandomHorizontalFlip(), T.ToTensor()]),
    )
    images, labels = next(iter(fl.DataLoader(ds, batch_size=6, num_workers=0)))
    assert images.shape == (6, 3, 16, 16)
    assert labels.tolist() == [0, 0, 0, 1, 1, 1]


def test_fake_data() -> None:
    fake = datasets.FakeData(size=5, image_size=(3, 10, 12), num_classes=4)
    image, target = fake[3]
    assert image.size == (12, 10)
    assert 0 <= target < 4
    assert np.array_equal(np.asarray(fake[3][0]), np.asarray(image))
    with pytest.raises(IndexError):
        fake[5]
    assert len(datasets.FakeData(size=5, image_size=(1, 4, 4))) == 5
    assert datasets.FakeData(size=2, image_size=(1, 4, 4))[0][0].mode == "L"
