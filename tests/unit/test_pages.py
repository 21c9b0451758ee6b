"""Large batch arrays on pages of ordinary size (_pages.py), and worker processes without
NumPy's huge-page advice (_worker/allocator.py), read from the kernel's own account."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import flowloader as fl
from flowloader import _pages

try:
    from numpy._core import multiarray
except ImportError:  # NumPy 1.x
    from numpy.core import multiarray  # type: ignore[no-redef]

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/smaps")


def vm_flags(array: np.ndarray) -> list[str]:
    """The kernel's VmFlags of the mapping that holds ``array``'s middle byte (NumPy advises
    from the first page boundary on, which splits the mapping)."""
    address = array.ctypes.data + array.nbytes // 2
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):
                start, end = (int(x, 16) for x in head.split("-"))
                inside = start <= address < end
            elif inside and head == "VmFlags:":
                return line.split()[1:]
    raise AssertionError("no mapping holds the array")


def test_large_arrays_are_writable_zeroed_and_shaped() -> None:
    array = _pages.empty((64, 3, 224, 224), np.float32)
    assert array.shape == (64, 3, 224, 224)
    assert array.dtype == np.float32
    assert array.flags.writeable
    assert array.flags.c_contiguous
    assert not array.any()  # fresh pages
    array[-1] = 1.5
    assert float(array.sum()) == 1.5 * 3 * 224 * 224


def test_small_and_object_arrays_are_numpy_s() -> None:
    assert _pages.empty((4, 8), np.float32).base is None
    objects = _pages.empty((_pages.OWN_MAPPING_BYTES // 8,), object)
    assert objects.base is None
    assert objects.dtype == object


@linux_only
def test_large_arrays_carry_no_huge_page_advice() -> None:
    ours = _pages.empty((_pages.OWN_MAPPING_BYTES,), np.uint8)
    assert "hg" not in vm_flags(ours)
    if multiarray._get_madvise_hugepage():  # NumPy's own, for comparison: advised
        assert "hg" in vm_flags(np.empty(_pages.OWN_MAPPING_BYTES, np.uint8))


class AdviceSeen(fl.Dataset):
    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int) -> np.ndarray:
        return np.array(multiarray._get_madvise_hugepage())


@pytest.mark.timeout(60)
def test_worker_processes_turn_numpy_s_advice_off_and_leave_the_user_s() -> None:
    before = multiarray._get_madvise_hugepage()
    seen = list(fl.DataLoader(AdviceSeen(), batch_size=2, num_workers=1))
    assert seen[0].tolist() == [False, False]
    assert multiarray._get_madvise_hugepage() == before
