"""ImageShards and `flowloader make-shards`: the same samples as the ImageFolder they were
packed from, resumable packing, and bad samples named by shard and key."""

from __future__ import annotations

import os

import numpy as np
import pytest

import flowloader as fl
from flowloader.cli.main import main
from flowloader.cli.make_shards import pack_image_folder
from flowloader.errors import SkippedSampleWarning
from flowloader.shards import ShardSampler
from flowloader.vision import datasets
from flowloader.vision import transforms as T

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    root = tmp_path_factory.mktemp("folder")
    datasets.make_image_folder(str(root / "src"), num_classes=3, images_per_class=7, size=(120, 90))
    report = pack_image_folder(str(root / "src"), str(root / "shards"), max_count=6)
    return str(root / "src"), report.shards


def train():
    return T.Compose(
        [T.RandomResizedCrop(48), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)]
    )


@pytest.mark.parametrize("workers", [0, 2])
def test_batches_match_the_image_folder_they_were_packed_from(packed, workers) -> None:
    source, shards = packed
    folder = datasets.ImageFolder(source, transform=train())
    sharded = datasets.ImageShards(shards, transform=train())
    assert len(sharded) == len(folder) == 21
    assert sharded.shard_sizes() == [6, 6, 6, 3]

    def batches(ds):
        loader = fl.DataLoader(ds, batch_size=5, shuffle=True, generator=4, num_workers=workers)
        return list(loader)

    for (a, la), (b, lb) in zip(batches(sharded), batches(folder), strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(la, lb)


def test_a_sample_is_image_and_label_like_image_folder(packed) -> None:
    source, shards = packed
    image, label = datasets.ImageShards(shards)[8]
    expected_image, expected_label = datasets.ImageFolder(source)[8]
    assert label == expected_label
    np.testing.assert_array_equal(np.asarray(image), np.asarray(expected_image))


def test_with_the_shard_sampler(packed) -> None:
    _, shards = packed
    ds = datasets.ImageShards(
        shards, transform=T.Compose([T.Resize(32), T.CenterCrop(32), T.PILToTensor()])
    )
    loader = fl.DataLoader(ds, batch_size=4, sampler=ShardSampler(ds, window=2), num_workers=2)
    labels = np.concatenate([label for _, label in loader])
    assert sorted(labels.tolist()) == sorted(t for _, t in datasets.ImageFolder(packed[0]).samples)


def test_a_corrupt_image_names_shard_and_key_and_can_be_skipped(tmp_path) -> None:
    from flowloader.shards import write_shards

    datasets.make_image_folder(
        str(tmp_path / "f"), num_classes=1, images_per_class=2, size=(40, 30)
    )
    jpegs = sorted((tmp_path / "f").rglob("*.jpg"))
    samples = [
        {"__key__": "a", "jpg": jpegs[0].read_bytes(), "cls": 0},
        {"__key__": "broken", "jpg": b"\xff\xd8\xff\xe0 not a jpeg", "cls": 0},
        {"__key__": "c", "jpg": jpegs[1].read_bytes(), "cls": 0},
    ]
    shards = write_shards(samples, str(tmp_path / "s-%d.tar"))
    ds = datasets.ImageShards(
        shards, transform=T.Compose([T.Resize(16), T.CenterCrop(16), T.ToTensor()])
    )
    with pytest.raises(OSError, match=r"s-0\.tar \(key 'broken'\)"):
        ds[1]
    with pytest.warns(SkippedSampleWarning):
        batches = list(fl.DataLoader(ds, batch_size=3, skip_errors=OSError))
    assert batches[0][0].shape == (2, 3, 16, 16)


def test_a_missing_member_is_named(packed) -> None:
    _, shards = packed
    with pytest.raises(KeyError, match="no member"):
        datasets.ImageShards(shards, image_key="png")[0]


def test_make_shards_resumes_and_rewrites_what_is_incomplete(tmp_path, capsys) -> None:
    source = tmp_path / "src"
    datasets.make_image_folder(str(source), num_classes=2, images_per_class=5, size=(60, 40))
    destination = tmp_path / "shards"
    assert main(["make-shards", str(source), str(destination), "--max-count", "4"]) == 0
    assert "10 samples in 3 shards" in capsys.readouterr().out
    # an interrupted run: one shard missing, one cut short
    os.unlink(destination / "shard-000001.tar")
    with open(destination / "shard-000002.tar", "r+b") as stream:
        stream.truncate(700)
    assert main(["make-shards", str(source), str(destination), "--max-count", "4"]) == 0
    assert "(2 written, 1 already complete)" in capsys.readouterr().out
    ds = datasets.ImageShards(str(destination / "shard-{000000..000002}.tar"))
    assert [ds[i][1] for i in range(len(ds))] == [0] * 5 + [1] * 5


def test_make_shards_reports_a_bad_source_in_one_line(tmp_path, capsys) -> None:
    assert main(["make-shards", str(tmp_path / "nothing"), str(tmp_path / "out")]) == 2
    assert "error" in capsys.readouterr().err
