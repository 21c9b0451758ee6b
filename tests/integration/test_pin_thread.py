"""pin_memory=True with workers: batches are pinned on a background thread, in sampler order,
with errors in their place, and nothing is lost to the look-ahead (state_dict, epochs).

These machines have no CUDA, so the page-locked copy is replaced by a recorded clone: every
other part (the thread, the order, the look-ahead, errors, shutdown) runs for real. The real
copy is checked on a GPU machine by tests/parity/test_output.py.
"""

from __future__ import annotations

import gc
import json
import threading

import numpy as np
import pytest

import flowloader as fl
from flowloader._compat import torch as torch_bridge
from flowloader.errors import WorkerCrashedError

from .loader_datasets import Arrays, Failing

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


@pytest.fixture
def pinned_on(monkeypatch) -> list[str]:
    """Pretend CUDA exists; record the thread that made each 'pinned' copy."""
    threads: list[str] = []

    def fake_pin(tensor):
        threads.append(threading.current_thread().name)
        return tensor.clone()

    monkeypatch.setattr(torch_bridge, "accelerator_available", lambda import_torch=False: True)
    monkeypatch.setattr(torch_bridge, "current_device", lambda: None)
    monkeypatch.setattr(torch_bridge, "pin", fake_pin)
    return threads


def pin_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("flowloader-pin")]


@pytest.mark.timeout(60)
def test_batches_are_pinned_off_the_main_thread_in_order(pinned_on) -> None:
    loader = fl.DataLoader(Arrays(23), batch_size=4, num_workers=2, output="torch", pin_memory=True)
    batches = list(loader)
    assert [b["label"].tolist() for b in batches] == [
        list(range(i, min(i + 4, 23))) for i in range(0, 23, 4)
    ]
    assert all(isinstance(b["image"], torch.Tensor) for b in batches)
    assert batches[-1]["image"][2, 0, 0, 0].item() == 22.0
    # image, label, extra int16 and extra array: four arrays per batch, each pinned once.
    assert len(pinned_on) == 4 * len(batches)
    assert all(name.startswith("flowloader-pin") for name in pinned_on)


@pytest.mark.timeout(60)
def test_in_process_loading_pins_in_line(pinned_on) -> None:
    loader = fl.DataLoader(Arrays(8), batch_size=4, output="torch", pin_memory=True)
    assert len(list(loader)) == 2
    assert set(pinned_on) == {threading.main_thread().name}


@pytest.mark.timeout(60)
def test_a_worker_error_arrives_in_its_place_and_loading_goes_on(pinned_on) -> None:
    loader = fl.DataLoader(
        Failing("exception", bad=9), batch_size=4, num_workers=2, output="torch", pin_memory=True
    )
    iterator = iter(loader)
    assert next(iterator).tolist() == [0, 1, 2, 3]
    assert next(iterator).tolist() == [4, 5, 6, 7]
    with pytest.raises(ValueError, match="cannot decode sample 9"):
        next(iterator)
    assert next(iterator).tolist() == [12, 13, 14, 15]
    with pytest.raises(StopIteration):
        next(iterator)


@pytest.mark.timeout(60)
def test_a_crash_comes_after_the_batches_before_it(pinned_on) -> None:
    loader = fl.DataLoader(
        Failing("os._exit", bad=9), batch_size=4, num_workers=1, output="torch", pin_memory=True
    )
    iterator = iter(loader)
    assert [next(iterator).tolist() for _ in range(2)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(WorkerCrashedError, match="exit code 7"):
        next(iterator)


@pytest.mark.timeout(60)
def test_look_ahead_loses_nothing_at_a_checkpoint(pinned_on) -> None:
    """The source ends while the last batches are still being pinned: the checkpoint must
    still place us before them, and a resumed loader must deliver exactly them."""

    def make() -> fl.DataLoader:
        return fl.DataLoader(
            Arrays(23), batch_size=4, num_workers=2, output="torch", pin_memory=True
        )

    loader = make()
    iterator = iter(loader)
    labels = [next(iterator)["label"].tolist() for _ in range(5)]  # 6 batches in the epoch
    state = json.loads(json.dumps(loader.state_dict()))
    assert state["batches_yielded"] == 5
    assert state["epoch"] == 0
    rest = next(iterator)["label"].tolist()
    with pytest.raises(StopIteration):
        next(iterator)
    del iterator

    resumed = make()
    resumed.load_state_dict(state)
    assert [b["label"].tolist() for b in resumed] == [rest] == [[20, 21, 22]]
    assert labels[0] == [0, 1, 2, 3]


@pytest.mark.timeout(60)
def test_persistent_workers_drop_an_abandoned_epochs_pins(pinned_on) -> None:
    loader = fl.DataLoader(
        Arrays(16),
        batch_size=4,
        num_workers=2,
        persistent_workers=True,
        output="torch",
        pin_memory=True,
    )
    first = iter(loader)
    next(first)  # abandon the epoch with batches pinned ahead
    second = [b["label"].tolist() for b in loader]
    assert second == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    del first, loader


@pytest.mark.timeout(60)
def test_the_pin_thread_ends_with_its_iterator(pinned_on) -> None:
    loader = fl.DataLoader(Arrays(16), batch_size=4, num_workers=2, output="torch", pin_memory=True)
    iterator = iter(loader)
    next(iterator)
    assert pin_threads()
    del iterator
    gc.collect()
    for thread in pin_threads():
        thread.join(timeout=5)
    assert not pin_threads()


@pytest.mark.timeout(60)
def test_pinned_values_match_unpinned(pinned_on) -> None:
    samples = [np.random.default_rng(i).random((3, 5), dtype=np.float32) for i in range(10)]
    plain = [b.copy() for b in fl.DataLoader(samples, batch_size=3, num_workers=2)]
    pinned = fl.DataLoader(samples, batch_size=3, num_workers=2, output="torch", pin_memory=True)
    for expected, got in zip(plain, pinned, strict=True):
        np.testing.assert_array_equal(got.numpy(), expected)
