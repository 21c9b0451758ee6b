"""Warnings point at the user's line (the ``for`` loop, ``iter()``, the constructor), not
into flowloader, however deep the call chain that raised them: a warning at the wrong frame
is filtered by the wrong module's filters and shows the wrong source line."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest

import flowloader as fl


class Counted(fl.IterableDataset):
    """Reports 2 samples, yields 4."""

    def __iter__(self):
        return iter(range(4))

    def __len__(self) -> int:
        return 2


class SomeBad(fl.Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> int:
        if i == 1:
            raise ValueError("bad")
        return i


def warned_at_its_line(action: Callable[[], Any], match: str) -> bool:
    """Whether every warning matching ``match`` (there must be one) that ``action`` (a
    one-line lambda) gives points at the lambda's own line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        action()
    [place] = {(w.filename, w.lineno) for w in caught if match in str(w.message)}
    return place == (__file__, action.__code__.co_firstlineno)


@pytest.mark.parametrize("workers", [0, 1])
def test_a_stream_longer_than_its_length(workers: int) -> None:
    loader = fl.DataLoader(Counted(), batch_size=None, num_workers=workers)
    len(loader)  # as PyTorch, the loader warns once its reported length was asked for
    assert warned_at_its_line(lambda: list(loader), "was reported to be")


@pytest.mark.parametrize("workers", [0, 2])
def test_pin_memory_without_an_accelerator(workers: int) -> None:
    loader = fl.DataLoader(list(range(4)), pin_memory=True, num_workers=workers)
    assert warned_at_its_line(lambda: iter(loader), "pin_memory=True has no effect")


@pytest.mark.parametrize("workers", [0, 2])
def test_a_skipped_sample(workers: int) -> None:
    loader = fl.DataLoader(SomeBad(), batch_size=2, num_workers=workers, skip_errors=ValueError)
    assert warned_at_its_line(lambda: list(loader), "DataLoader skipped sample 1")


def test_too_many_workers(monkeypatch) -> None:
    monkeypatch.setattr(fl.resources, "usable_cores", lambda: 1)
    construct = lambda: fl.DataLoader(list(range(4)), num_workers=3)  # noqa: E731
    assert warned_at_its_line(construct, "worker processes in total")
