"""Running out of shared memory is a clear SharedMemoryError, never a bus error or a hang.

These tests mount a small tmpfs and point FLOWLOADER_SHM_DIR at it; they need root (as CI and
the development machines have) and are skipped where mounting is not allowed.
"""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

import flowloader as fl
from flowloader._ipc import batch_codec
from flowloader.errors import SharedMemoryError


class Images(fl.Dataset):
    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int):
        return np.zeros((3, 224, 224), np.float32), i


@pytest.fixture
def small_tmpfs(tmp_path, monkeypatch):
    def mount(megabytes: int) -> str:
        target = tmp_path / f"shm{megabytes}"
        target.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(target)],
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        mounted.append(target)
        monkeypatch.setenv("FLOWLOADER_SHM_DIR", str(target))
        return str(target)

    mounted: list = []
    yield mount
    for target in mounted:
        subprocess.run(["umount", "-l", str(target)], check=False)


def test_too_little_shared_memory_at_start(small_tmpfs) -> None:
    path = small_tmpfs(4)
    loader = fl.DataLoader(Images(), batch_size=16, num_workers=2)
    with pytest.raises(SharedMemoryError, match=rf"free in {path}.*--shm-size"):
        iter(loader)


@pytest.mark.timeout(60)
def test_running_out_mid_epoch_is_an_error_not_a_bus_error(small_tmpfs) -> None:
    small_tmpfs(40)  # room for 3-4 batches of 9.6 MB, not for the 8+ that are in flight
    loader = fl.DataLoader(Images(), batch_size=16, num_workers=2, prefetch_factor=4)
    with pytest.raises(SharedMemoryError, match="out of shared memory") as caught:
        list(loader)  # keeping every batch forces new segments
    assert re.search(r"This program still holds \d+ batch\(es\)", str(caught.value))
    assert "keep a copy of what you keep (x.copy())" in str(caught.value)


@pytest.mark.timeout(60)
def test_labels_kept_from_every_batch_keep_no_shared_memory(small_tmpfs) -> None:
    """The usual metrics loop: every batch's labels kept (16 batches of 9.6 MB, in room for
    7): small leaves are copies, so the segments go back to the workers."""
    small_tmpfs(80)
    loader = fl.DataLoader(Images(), batch_size=16, num_workers=2, prefetch_factor=1)
    labels = [y for _, y in loader]
    assert np.concatenate(labels).tolist() == list(range(256))
    assert all(y.base is None for y in labels)
    assert batch_codec.held_batches() == 0


class Large(fl.Dataset):
    """Batches of 64 are 38.5 MB: a thread worker builds them in its reused blocks."""

    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int):
        return np.full((3, 224, 224), i % 7, np.float32), i


@pytest.mark.timeout(60)
@pytest.mark.parametrize("method", ["thread", "in-process"])
def test_kept_labels_hold_no_batch_block(method) -> None:
    """Thread workers build big batches in blocks they reuse: the labels are not in them."""
    workers = {"num_workers": 2, "worker_method": "thread"} if method == "thread" else {}
    labels = [y for _, y in fl.DataLoader(Large(), batch_size=64, **workers)]
    assert np.concatenate(labels).tolist() == list(range(256))
    assert all(y.base is None for y in labels)
