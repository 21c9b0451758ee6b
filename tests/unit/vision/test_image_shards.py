"""ImageShards and `flowloader make-shards`: the same samples and class names as the
ImageFolder they were packed from, resumable packing, files that are not readable images
skipped (or refused with --strict), and bad samples named by shard and key."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
from PIL import Image

import flowloader as fl
from flowloader.cli.main import main
from flowloader.cli.make_shards import pack_image_folder, unreadable
from flowloader.errors import SkippedSampleWarning
from flowloader.shards import ShardSampler
from flowloader.vision import datasets
from flowloader.vision import transforms as T

from ...shard_server import ShardServer

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


def test_classes_travel_with_the_shards(packed) -> None:
    source, shards = packed
    folder = datasets.ImageFolder(source)
    for where in (shards, os.path.dirname(shards[0])):
        sharded = datasets.ImageShards(where)
        assert sharded.classes == folder.classes == ["class_000", "class_001", "class_002"]
        assert sharded.class_to_idx == folder.class_to_idx


def test_remote_shards_read_their_classes_on_first_use_only(packed, tmp_path) -> None:
    _, shards = packed
    with ShardServer(os.path.dirname(shards[0])) as server:
        ds = datasets.ImageShards(server.url("shard-{000000..000003}.tar"), cache_dir=tmp_path)
        assert server.gets["classes.json"] == 0
        assert ds.class_to_idx["class_002"] == 2
        assert ds.classes[1] == "class_001"
        assert server.gets["classes.json"] == 1


def test_shards_without_a_class_record_say_so(tmp_path) -> None:
    from flowloader.shards import write_shards

    shards = write_shards([{"__key__": "a", "jpg": b"x", "cls": 0}], str(tmp_path / "s-%d.tar"))
    ds = datasets.ImageShards(shards)
    with pytest.raises(AttributeError, match=r"carry no class names.*make-shards records one"):
        _ = ds.classes
    with pytest.raises(AttributeError, match="carry no class names"):
        _ = ds.class_to_idx
    assert not hasattr(ds, "classes")


def encoded(fmt: str, **options) -> bytes:
    image = Image.fromarray(np.random.default_rng(0).integers(0, 255, (30, 40, 3), np.uint8))
    stream = io.BytesIO()
    image.save(stream, fmt, **options)
    return stream.getvalue()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (encoded("JPEG"), None),
        (encoded("JPEG", progressive=True) + b"a trailer after the end marker", None),
        (encoded("PNG"), None),
        (b"not an image at all", "Pillow cannot identify it as an image"),
        (encoded("JPEG", progressive=True)[:-300], "truncated JPEG"),
        (encoded("PNG")[:-100], "damaged PNG"),
    ],
)
def test_what_counts_as_a_readable_image(tmp_path, data, problem) -> None:
    (tmp_path / "file").write_bytes(data)
    found = unreadable(str(tmp_path / "file"))
    assert found == problem if problem is None else found.startswith(problem)


@pytest.fixture
def with_bad_files(tmp_path):
    """An ImageFolder of 3 classes of 2 JPEGs, plus a text file named .jpg in class_000 and a
    truncated JPEG as the only file of class_003."""
    source = tmp_path / "src"
    datasets.make_image_folder(str(source), num_classes=3, images_per_class=2, size=(40, 30))
    (source / "class_000" / "notes.jpg").write_text("not an image")
    (source / "class_003").mkdir()
    good = (source / "class_001" / "img_00000.jpg").read_bytes()
    (source / "class_003" / "cut.jpg").write_bytes(good[:-100])  # its header whole
    return source


def test_make_shards_skips_files_that_are_not_readable_images(with_bad_files, capsys) -> None:
    source, destination = str(with_bad_files), str(with_bad_files.parent / "shards")
    assert main(["make-shards", source, destination, "--max-count", "4"]) == 0
    out = capsys.readouterr().out
    assert "6 samples in 2 shards" in out
    notes = os.path.join(source, "class_000", "notes.jpg")
    assert f"skipped 2 files that are not readable images (first: {notes}: Pillow cannot" in out
    ds = datasets.ImageShards(destination, transform=T.PILToTensor())
    assert [ds[i][1] for i in range(len(ds))] == [0, 0, 1, 1, 2, 2]
    assert ds.classes == ["class_000", "class_001", "class_002", "class_003"]  # not renumbered
    # a rerun plans the same shards, so it keeps them; the library's report lists the files
    report = pack_image_folder(source, destination, max_count=4)
    assert (report.written, report.kept, report.samples) == (0, 2, 6)
    assert [(os.path.basename(path), problem[:14]) for path, problem in report.skipped] == [
        ("notes.jpg", "Pillow cannot "),
        ("cut.jpg", "truncated JPEG"),
    ]


def test_make_shards_strict_stops_at_the_first_bad_file(with_bad_files, capsys) -> None:
    destination = with_bad_files.parent / "shards"
    assert main(["make-shards", str(with_bad_files), str(destination), "--strict"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    notes = with_bad_files / "class_000" / "notes.jpg"
    assert line == f"flowloader make-shards: error: {notes} is not a readable image: " + (
        "Pillow cannot identify it as an image"
    )
    assert not destination.exists()
