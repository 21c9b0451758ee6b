"""Running out of shared memory is a clear SharedMemoryError, never a bus error or a hang.

These tests mount a small tmpfs and point FLOWLOADER_SHM_DIR at it; they need root (as CI and
the development machines have) and are skipped where mounting is not allowed.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import flowloader as fl
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
    with pytest.raises(SharedMemoryError, match="out of shared memory"):
        list(loader)  # keeping every batch forces new segments
