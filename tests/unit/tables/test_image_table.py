"""ImageTable: a table's image column through the vision pipeline as files are: the same
batches as the ImageFolder its images came from (any workers, threads, BlockShuffleSampler),
captions as targets, Hugging Face's Image struct, and bad rows named by table, row and
column (and skippable)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import flowloader as fl  # noqa: E402
from flowloader.errors import SkippedSampleWarning  # noqa: E402
from flowloader.vision import datasets  # noqa: E402
from flowloader.vision import transforms as T  # noqa: E402

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def train() -> T.Compose:
    return T.Compose(
        [T.RandomResizedCrop(48), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)]
    )


@pytest.fixture(scope="module")
def folder_and_table(tmp_path_factory):
    """An ImageFolder of 3 x 7 JPEGs and the same images, in its order, in a Parquet table
    (image bytes, label, caption) of row groups of 5."""
    root = tmp_path_factory.mktemp("images")
    datasets.make_image_folder(str(root / "src"), num_classes=3, images_per_class=7, size=(120, 90))
    folder = datasets.ImageFolder(str(root / "src"))
    images = [open(path, "rb").read() for path, _ in folder.samples]  # noqa: SIM115
    labels = [label for _, label in folder.samples]
    captions = [f"a picture of {folder.classes[label]}" for label in labels]
    table = pa.table({"jpg": images, "label": labels, "caption": captions})
    pq.write_table(table, root / "images.parquet", row_group_size=5)
    return str(root / "src"), str(root / "images.parquet")


@pytest.mark.parametrize(("workers", "method"), [(0, None), (2, "multiprocessing"), (2, "thread")])
def test_batches_match_the_image_folder(folder_and_table, workers, method) -> None:
    source, table = folder_and_table
    by_file = datasets.ImageFolder(source, transform=train())
    by_row = datasets.ImageTable(table, "jpg", "label", transform=train())
    assert len(by_row) == len(by_file) == 21

    def batches(ds):
        options = {"worker_method": method} if method else {}
        loader = fl.DataLoader(
            ds, batch_size=5, shuffle=True, generator=4, num_workers=workers, **options
        )
        return list(loader)

    for (a, la), (b, lb) in zip(batches(by_row), batches(by_file), strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(la, lb)
        assert la.dtype == np.int64


def test_block_shuffled_every_row_once_and_captions_as_targets(folder_and_table) -> None:
    _, table = folder_and_table
    ds = datasets.ImageTable(
        table, "jpg", "caption", transform=T.Compose([T.Resize(32), T.CenterCrop(32), T.ToTensor()])
    )
    assert ds.block_sizes() == [5, 5, 5, 5, 1]
    sampler = fl.BlockShuffleSampler(ds, window=2, seed=1)
    loader = fl.DataLoader(ds, batch_size=4, sampler=sampler, num_workers=2)
    captions = []
    for images, texts in loader:
        assert images.shape[1:] == (3, 32, 32)
        assert isinstance(texts, list)
        assert all(isinstance(t, str) for t in texts)
        captions += texts
    assert sorted(captions) == sorted(pq.read_table(table)["caption"].to_pylist())
    image, caption = ds[3]
    assert caption.startswith("a picture of ")
    assert image.shape == (3, 32, 32)


def test_without_a_target_column_the_target_is_the_row(folder_and_table) -> None:
    _, table = folder_and_table
    ds = datasets.ImageTable(table, "jpg", transform=T.Compose([T.Resize(16), T.ToTensor()]))
    rows = np.concatenate([t for _, t in fl.DataLoader(ds, batch_size=8)])
    assert rows.tolist() == list(range(21))


def test_the_image_struct_of_hugging_face_datasets(folder_and_table, tmp_path) -> None:
    source, table = folder_and_table
    plain = pq.read_table(table)
    struct = pa.StructArray.from_arrays(
        [plain["jpg"].combine_chunks(), pa.array([None] * 21, pa.string())], ["bytes", "path"]
    )
    pq.write_table(pa.table({"image": struct, "label": plain["label"]}), tmp_path / "hf.parquet")
    ds = datasets.ImageTable(str(tmp_path / "hf.parquet"), target_column="label")
    image, label = ds[9]
    expected, expected_label = datasets.ImageFolder(source)[9]
    assert label == expected_label
    np.testing.assert_array_equal(np.asarray(image), np.asarray(expected))


def test_a_datasets_dataset_as_the_table(folder_and_table) -> None:
    hf = pytest.importorskip("datasets")
    source, table = folder_and_table
    rows = hf.Dataset.from_parquet(table, cache_dir=os.path.dirname(table) + "/hf-cache")
    ds = datasets.ImageTable(rows, "jpg", "label", transform=train())
    by_file = datasets.ImageFolder(source, transform=train())
    for (a, la), (b, lb) in zip(
        fl.DataLoader(ds, batch_size=7, shuffle=True, generator=2),
        fl.DataLoader(by_file, batch_size=7, shuffle=True, generator=2),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(la, lb)


def test_bad_rows_are_named_and_can_be_skipped(folder_and_table, tmp_path) -> None:
    _, table = folder_and_table
    plain = pq.read_table(table)
    images = plain["jpg"].to_pylist()
    images[4] = b"not a jpeg at all"
    images[11] = None
    bad = pa.table({"jpg": pa.array(images, pa.binary()), "label": plain["label"]})
    pq.write_table(bad, tmp_path / "bad.parquet", row_group_size=5)
    path = str(tmp_path / "bad.parquet")
    ds = datasets.ImageTable(path, "jpg", "label", transform=train())
    with pytest.raises(Exception, match=f"cannot load sample 4 from {path} row 4"):
        ds[4]
    with pytest.raises(TypeError, match="column 'jpg' holds null, not image bytes"):
        ds[11]
    with pytest.raises(ValueError, match="no column \\['img'\\]"):
        datasets.ImageTable(path, "img", "label")
    loader = fl.DataLoader(ds, batch_size=5, num_workers=2, skip_errors=Exception)
    with pytest.warns(SkippedSampleWarning):
        labels = np.concatenate([label for _, label in loader])
    assert len(labels) == 19


def test_importing_vision_does_not_import_pyarrow() -> None:
    code = "import sys, flowloader.vision.datasets; print('pyarrow' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr
