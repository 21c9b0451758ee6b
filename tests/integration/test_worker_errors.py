"""Exceptions raised in workers come back with their type, the worker, the indices and the
worker's traceback; the loader can go on after them, as PyTorch's does."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import flowloader as fl
from flowloader.errors import WorkerError

from .loader_datasets import Arrays, Failing, failing_init


def test_exception_keeps_type_and_names_worker_indices_and_traceback() -> None:
    loader = fl.DataLoader(Failing("exception", bad=5), batch_size=4, num_workers=2)
    iterator = iter(loader)
    assert next(iterator).tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="cannot decode sample 5") as caught:
        next(iterator)
    message = str(caught.value)
    assert "DataLoader worker 1" in message
    assert "raised by sample 5 of Failing; the batch's dataset indices [4, 5, 6, 7]" in message
    assert "Traceback" in message
    assert "in __getitem__" in message
    # Later batches still arrive.
    assert next(iterator).tolist() == [8, 9, 10, 11]


class Quiet(fl.Dataset):
    """Sample 6 raises an error that does not say which sample it is."""

    def __len__(self) -> int:
        return 12

    def __getitem__(self, index: int) -> int:
        if index == 6:
            raise ValueError("bad header")
        return index


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception notes came in Python 3.11")
def test_without_workers_the_error_notes_which_sample_raised_it() -> None:
    iterator = iter(fl.DataLoader(Quiet(), batch_size=4))
    next(iterator)
    with pytest.raises(ValueError, match=r"^bad header") as caught:
        next(iterator)
    assert caught.value.__notes__ == [
        "flowloader.DataLoader: raised by sample 6 of Quiet loading dataset indices [4, 5, 6, 7]"
    ]


def test_a_worker_error_names_the_sample_that_raised_it() -> None:
    loader = fl.DataLoader(Quiet(), batch_size=4, num_workers=2)
    with pytest.raises(ValueError, match="bad header; raised by sample 6 of Quiet; the batch"):
        list(loader)


def test_key_error_message_stays_readable() -> None:
    loader = fl.DataLoader(Failing("keyerror", bad=0), batch_size=2, num_workers=1)
    with pytest.raises(KeyError) as caught:
        next(iter(loader))
    assert "\\n" not in str(caught.value)
    assert "DataLoader worker 0" in str(caught.value)


def test_exception_that_cannot_be_rebuilt_falls_back_to_worker_error() -> None:
    loader = fl.DataLoader(Failing("unbuildable", bad=1), batch_size=2, num_workers=1)
    with pytest.raises(WorkerError, match=r"NeedsTwoArguments.*could not be re-created"):
        next(iter(loader))


def test_collate_fn_errors_are_reported() -> None:
    def bad_collate(samples):
        raise TypeError("collate refused")

    loader = fl.DataLoader(Arrays(6), batch_size=3, num_workers=2, collate_fn=bad_collate)
    with pytest.raises(
        TypeError, match=r"collate refused[\s\S]*\[0, 1, 2\]|\[0, 1, 2\][\s\S]*collate refused"
    ):
        next(iter(loader))


def test_getitems_errors_are_reported() -> None:
    class Batched(fl.Dataset):
        def __len__(self):
            return 4

        def __getitems__(self, indices):
            raise OSError(f"read failed for {indices}")

    loader = fl.DataLoader(Batched(), batch_size=2, num_workers=1)
    with pytest.raises(OSError, match=r"read failed for \[0, 1\]"):
        next(iter(loader))


def test_worker_init_fn_errors_are_reported() -> None:
    loader = fl.DataLoader(Arrays(4), batch_size=2, num_workers=2, worker_init_fn=failing_init)
    with pytest.raises(
        RuntimeError,
        match=r"init failed in 0[\s\S]*worker_init_fn|worker_init_fn[\s\S]*init failed in 0",
    ):
        next(iter(loader))


def test_unpicklable_batch_leaf_is_reported() -> None:
    def collate_with_lambda(samples):
        return lambda: samples

    loader = fl.DataLoader(Arrays(4), batch_size=2, num_workers=1, collate_fn=collate_with_lambda)
    with pytest.raises(Exception, match="while sending the batch"):
        next(iter(loader))


def test_non_array_leaves_travel_too() -> None:
    loader = fl.DataLoader(Arrays(4), batch_size=2, num_workers=2)
    batch = next(iter(loader))
    assert batch["name"] == ["sample-0", "sample-1"]


@pytest.mark.timeout(60)
def test_a_corrupt_image_in_a_batch_written_into_shared_memory(tmp_path) -> None:
    """ImageFolder's batch path reserves the batch array in shared memory before loading the
    images: a corrupt one mid-batch is reported, and the batches after it still arrive."""
    from flowloader.vision import datasets
    from flowloader.vision import transforms as T

    datasets.make_image_folder(str(tmp_path), num_classes=1, images_per_class=12, size=(40, 30))
    files = sorted((tmp_path / "class_000").iterdir())
    files[5].write_bytes(b"\xff\xd8\xff\xe0 not a jpeg")
    transform = T.Compose([T.CenterCrop(24), T.ToTensor(), T.Normalize((0.5,) * 3, (0.2,) * 3)])
    ds = datasets.ImageFolder(str(tmp_path), transform=transform)
    iterator = iter(fl.DataLoader(ds, batch_size=4, num_workers=2))
    assert next(iterator)[0].shape == (4, 3, 24, 24)
    with pytest.raises(OSError, match=rf"cannot load sample 5 from .*{files[5].name}") as caught:
        next(iterator)
    first_line = str(caught.value).splitlines()[0]
    assert "DataLoader worker 1" in first_line
    assert f"cannot load sample 5 from {files[5]}" in first_line  # not only at the bottom
    images, labels = next(iterator)
    assert labels.tolist() == [0, 0, 0, 0]
    np.testing.assert_array_equal(images[1], ds[9][0])


def collect(loader: fl.DataLoader, into: list, keep) -> None:
    """Append ``keep(batch)`` for each batch to ``into`` (kept if loading raises)."""
    for batch in loader:
        into.append(keep(batch))


class StopsAt(fl.Dataset):
    """A map-style dataset whose sample 5 raises StopIteration (a bug in user code)."""

    def __len__(self) -> int:
        return 12

    def __getitem__(self, i: int) -> int:
        if i == 5:
            raise StopIteration
        return i


@pytest.mark.parametrize(
    ("workers", "worker_method"), [(0, "multiprocessing"), (2, "multiprocessing"), (2, "thread")]
)
def test_stop_iteration_in_a_map_style_dataset_is_an_error_not_a_short_epoch(
    workers: int, worker_method: str
) -> None:
    loader = fl.DataLoader(
        StopsAt(), batch_size=2, num_workers=workers, worker_method=worker_method
    )
    delivered: list = []
    with pytest.raises(RuntimeError, match="raised StopIteration"):
        collect(loader, delivered, lambda batch: batch.tolist())
    assert delivered == [[0, 1], [2, 3]]


class Unreadable:
    """Pickles in the worker, but cannot be rebuilt in the main process."""

    def __reduce__(self):
        return (_refuse_in_main, (os.getpid(),))


def _refuse_in_main(pid: int) -> Unreadable:
    if os.getpid() != pid:
        raise AttributeError("no such class here")
    return Unreadable()


class OneUnreadable(fl.Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int):
        return (i, Unreadable()) if i == 2 else (i,)


@pytest.mark.timeout(60)
def test_a_reply_the_main_process_cannot_read_fails_its_batches_instead_of_hanging() -> None:
    loader = fl.DataLoader(OneUnreadable(), batch_size=2, num_workers=2, collate_fn=list)
    delivered: list = []
    with pytest.raises(fl.errors.WorkerCrashedError, match="could not be read") as caught:
        collect(loader, delivered, lambda batch: [sample[0] for sample in batch])
    assert delivered == [[0, 1]]
    assert "[2, 3]" in str(caught.value)


def test_a_large_batch_names_its_first_indices_not_all() -> None:
    """A worker's error names at most eight of its batch's indices and how many in all (a
    batch of 256 once made a 7 KB message)."""
    loader = fl.DataLoader(Failing("exception", bad=5, n=300), batch_size=256, num_workers=1)
    listed = r"indices \[0, 1, 2, 3, 4, 5, 6, 7, \.\.\. \(256 in all\)\]"
    with pytest.raises(ValueError, match=listed):
        next(iter(loader))
