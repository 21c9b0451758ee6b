"""A batch's files read in one native call (native.read_files, DatasetFolder._read_ahead):
the same bytes as Python's own reads; anything it cannot read is left to Python, so that the
error users see is the one ``open`` raises, naming the sample."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import flowloader as fl
from flowloader.errors import SkippedSampleWarning
from flowloader.randomness import SampleRngs, SampleSeeds
from flowloader.vision import datasets, native
from flowloader.vision import transforms as T
from flowloader.vision.datasets import folder
from flowloader.vision.datasets.planned import PlannedImageDataset

from .test_native_kernel import jpeg

pytestmark = pytest.mark.skipif(
    not native.available() and os.environ.get("FLOWLOADER_REQUIRE_NATIVE") != "1",
    reason=f"native kernel: {native.unavailable_reason()}",
)


def test_files_come_back_whole_and_what_cannot_be_read_is_none(tmp_path) -> None:
    small, empty = tmp_path / "small", tmp_path / "empty"
    small.write_bytes(b"\xff\xd8" + bytes(range(256)) * 40)
    empty.write_bytes(b"")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it for reading would block until a writer came
    paths = [
        str(small), str(tmp_path / "missing"), str(tmp_path), str(fifo), str(empty),
        os.fsencode(small), "nul\0inside", small,
    ]  # fmt: skip
    got = native.read_files(paths, 1 << 30)
    assert got == [small.read_bytes(), None, None, None, b"", small.read_bytes(), None,
                   small.read_bytes()]  # fmt: skip


def test_the_byte_budget_ends_a_call_after_at_least_one_file(tmp_path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 1000)
    assert native.read_files([str(path)] * 5, 2500) == [b"x" * 1000] * 2
    assert native.read_files([str(path)] * 3, 10) == [b"x" * 1000]
    # files it could not read take no budget
    assert native.read_files([str(tmp_path / "gone"), str(path), str(path)], 1500) == [
        None,
        b"x" * 1000,
    ]
    assert native.read_files([], 10) == []


def test_a_file_that_grows_while_read_is_left_to_python(tmp_path) -> None:
    """/proc files report a size of 0 but have contents: the read finds more than fstat
    said, so the caller reads it."""
    assert native.read_files(["/proc/self/status"], 1 << 20) == [None]


def folder_of(tmp_path, count: int) -> datasets.ImageFolder:
    for i in range(count):
        directory = tmp_path / f"class_{i % 2}"
        directory.mkdir(exist_ok=True)
        (directory / f"{i:03d}.jpg").write_bytes(jpeg(160 + 8 * i, 120, seed=i))
    pipeline = T.Compose([T.RandomResizedCrop(64), T.RandomHorizontalFlip(), T.ToTensor()])
    return datasets.ImageFolder(str(tmp_path), transform=pipeline)


def test_a_batch_read_ahead_in_several_calls_matches_one_read_per_file(
    tmp_path, monkeypatch
) -> None:
    dataset = folder_of(tmp_path, 12)
    indices = [11, 0, 5, 3, 9, 2, 7]
    seeds = SampleSeeds(5)
    calls = []
    read_files = native.read_files

    def counted(paths, max_bytes):
        calls.append(len(paths))
        return read_files(paths, max_bytes)

    monkeypatch.setattr(native, "read_files", counted)
    monkeypatch.setattr(folder, "READ_AHEAD_BYTES", 20_000)  # two of these files a call
    images, targets = dataset.__getitems__(indices, SampleRngs(seeds, indices)).columns
    assert calls == [7, 5, 3, 1]  # the paths left at each call
    with monkeypatch.context() as m:  # every file read by the sample's own load
        m.setattr(folder.DatasetFolder, "_read_ahead", PlannedImageDataset._read_ahead)
        expected = dataset.__getitems__(indices, SampleRngs(seeds, indices)).columns
    assert len(calls) == 4
    np.testing.assert_array_equal(images, expected[0])
    np.testing.assert_array_equal(targets, expected[1])


@pytest.mark.parametrize("worker_method", ["thread", "multiprocessing"])
def test_a_file_gone_after_listing_is_named_and_skipped(tmp_path, worker_method) -> None:
    """The batch read leaves the missing file to the sample's own open: its error names the
    sample, and skip_errors drops it alone."""
    dataset = folder_of(tmp_path, 6)
    gone = dataset.samples[3][0]
    os.unlink(gone)
    loader = fl.DataLoader(dataset, batch_size=6, num_workers=2, worker_method=worker_method)
    with pytest.raises(FileNotFoundError, match=rf"cannot load sample 3 from {gone}"):
        next(iter(loader))
    skipping = fl.DataLoader(
        dataset, batch_size=6, num_workers=2, worker_method=worker_method,
        skip_errors=FileNotFoundError,
    )  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ((images, labels),) = list(skipping)
    assert images.shape == (5, 3, 64, 64)
    assert labels.tolist() == [t for i, (_, t) in enumerate(dataset.samples) if i != 3]
    skipped = [str(w.message) for w in caught if issubclass(w.category, SkippedSampleWarning)]
    assert len(skipped) == 1
    assert gone in skipped[0]


def test_without_the_kernel_files_are_read_one_by_one(tmp_path) -> None:
    """FLOWLOADER_NATIVE=0 switches the batch read off with the kernel (the reader is never
    called), and the batch is the samples' own."""
    folder_of(tmp_path, 4)
    script = f"""
import numpy as np
from flowloader.vision import datasets, native, transforms as T
native.read_files = None  # fails if called
pipeline = T.Compose([T.Resize(40), T.CenterCrop(32), T.PILToTensor()])
ds = datasets.ImageFolder({str(tmp_path)!r}, transform=pipeline)
images, labels = ds.__getitems__([0, 1, 2, 3]).columns
samples = [ds[i] for i in range(4)]
assert np.array_equal(images, np.stack([image for image, _ in samples]))
print(labels.tolist())
"""
    env = dict(os.environ, FLOWLOADER_NATIVE="0")
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[0, 0, 1, 1]\n"
