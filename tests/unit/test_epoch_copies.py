"""Thread workers each hold a shallow copy of the dataset. A wrapper that hands its epoch to
what it wraps (Packed, Subset, ConcatDataset, a user's) shares that inner dataset with every
other copy unless the copy takes its own: a late worker of one epoch that sets its copy's
epoch then moves the others' inner Mixture back, and the next epoch reads the last one's
rows (found by tests/integration/test_resume_machine.py, now and then, on threads)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import flowloader as fl
from flowloader._iter.threads import _own_copy
from flowloader.text import Packed
from tests.integration.test_resume_chains import ClipView  # a user's wrapper


def documents(count: int, length: int, tag: int) -> list[np.ndarray]:
    return [np.arange(length, dtype=np.int64) + tag * 1_000_000 + d * 1_000 for d in range(count)]


def mixture() -> fl.Mixture:
    sources = {"web": documents(30, 7, 1), "code": documents(50, 5, 2)}
    return fl.Mixture(sources, [0.5, 0.5], seed=3)


def wrapped(kind: str) -> fl.Dataset:
    if kind == "packed":
        return Packed(mixture(), 16, block=8, shuffle=True)
    if kind == "packed-subset":
        return Packed(fl.Subset(mixture(), list(range(40))), 16, block=8)
    if kind == "subset":
        return fl.Subset(mixture(), list(range(40)))
    if kind == "concat":
        return fl.ConcatDataset([mixture(), fl.Subset(mixture(), [1, 2, 3])])
    return ClipView(Packed(mixture(), 16, block=8))


def items(dataset: fl.Dataset) -> list[list[int]]:
    out = []
    for i in range(len(dataset)):
        item = dataset[i]
        out.append((item["tokens"] if isinstance(item, dict) else item).tolist())
    return out


@pytest.mark.parametrize("kind", ["packed", "packed-subset", "subset", "concat", "users"])
def test_a_late_copy_of_the_last_epoch_never_moves_the_next_epoch_s(kind) -> None:
    main = wrapped(kind)
    reference = wrapped(kind)
    reference.set_epoch(1)
    expected = items(reference)

    last_epochs_worker = _own_copy(main)  # made while the loader read epoch 0
    main.set_epoch(1)  # the next iter(): the main process moves on
    next_epochs_worker = _own_copy(main)
    last_epochs_worker.set_epoch(0)  # a late worker of epoch 0 starts its first task
    assert items(next_epochs_worker) == expected
    assert items(main) == expected
    assert fl.order.epoch_of(last_epochs_worker) == 0


@pytest.mark.parametrize("kind", ["packed", "subset", "concat", "users"])
def test_copies_and_pickles_read_what_the_original_reads(kind) -> None:
    main = wrapped(kind)
    main.set_epoch(2)
    expected = items(main)
    assert items(_own_copy(main)) == expected
    assert items(pickle.loads(pickle.dumps(main))) == expected


def test_an_inner_dataset_without_an_epoch_stays_shared() -> None:
    """Arrays and plain datasets are not copied: a thread's copy shares them."""
    inner = fl.TensorDataset(np.arange(10))
    subset = fl.Subset(inner, [1, 2])
    assert _own_copy(subset).dataset is inner


def test_a_dataset_that_refers_to_itself_is_copied_once() -> None:
    main = ClipView(mixture())
    main.itself = main
    copied = _own_copy(main)
    assert copied is not main
    assert copied.itself is copied
    assert copied.dataset is not main.dataset
