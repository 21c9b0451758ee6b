"""The keyed permutation (flowloader.permutation): a bijection for every n, the native kernel
and the NumPy path agreeing, passes distinct and uniform, and no order left in the output."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowloader import permutation
from flowloader.permutation import SMALL, name_hash, pass_keys, permute


def passes(n: int, count: int, seed: int = 5) -> np.ndarray:
    """``count`` passes over ``range(n)`` of one stream: row p is pass p's order."""
    keys = pass_keys(seed, np.full(count, name_hash("web"), np.uint64), np.arange(count))
    return np.stack([permute(np.arange(n), np.full(n, n), np.full(n, key)) for key in keys])


@pytest.fixture(params=["native", "numpy"])
def path(request, monkeypatch) -> str:
    if request.param == "native":
        if not permutation.native_available():
            pytest.skip("the native kernel is not built here")
    else:
        monkeypatch.setenv("FLOWLOADER_NATIVE", "0")
    return request.param


@pytest.mark.parametrize("n", [1, 2, 3, 7, SMALL, SMALL + 1, 64, 1000, 4099])
def test_every_pass_is_a_permutation(n: int, path: str) -> None:
    for order in passes(n, 4):
        assert sorted(order.tolist()) == list(range(n))


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 2**62), min_size=1, max_size=40),
    data=st.data(),
)
def test_native_and_numpy_agree(sizes, data) -> None:
    if not permutation.native_available():
        pytest.skip("the native kernel is not built here")
    n = np.array(sizes, dtype=np.int64)
    j = np.array([data.draw(st.integers(0, max(s - 1, 0))) for s in sizes], dtype=np.int64)
    keys = np.array([data.draw(st.integers(0, 2**64 - 1)) for _ in sizes], dtype=np.uint64)
    native = permute(j, n, keys)
    os.environ["FLOWLOADER_NATIVE"] = "0"
    try:
        numpy_path = permute(j, n, keys)
    finally:
        del os.environ["FLOWLOADER_NATIVE"]
    assert native.tolist() == numpy_path.tolist()
    assert all(0 <= v < max(s, 1) for v, s in zip(native.tolist(), sizes, strict=True))


def test_a_ten_sample_source_has_many_orders(path: str) -> None:
    """1,000 passes of 10 samples: at least 900 distinct orders (of 10! possible)."""
    orders = {tuple(order) for order in passes(10, 1000).tolist()}
    assert len(orders) >= 900


def test_passes_of_a_thousand_samples_are_all_distinct() -> None:
    orders = {tuple(order) for order in passes(1000, 1000).tolist()}
    assert len(orders) == 1000


@pytest.mark.parametrize("n", [3, 10, SMALL + 1, 100])
def test_the_first_element_is_uniform_over_passes(n: int) -> None:
    """Chi-square of pass p's first element over 20,000 passes, against the 0.999 quantile
    of its distribution (n - 1 degrees of freedom, by the Wilson-Hilferty approximation)."""
    count = 20_000
    keys = pass_keys(11, np.full(count, name_hash("code"), np.uint64), np.arange(count))
    first = permute(np.zeros(count, np.int64), np.full(count, n), keys)
    observed = np.bincount(first, minlength=n)
    expected = count / n
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    dof = n - 1
    z = 3.09  # the standard normal's 0.999 quantile
    bound = dof * (1 - 2 / (9 * dof) + z * (2 / (9 * dof)) ** 0.5) ** 3
    assert chi2 < bound, (observed.tolist(), chi2, bound)


@pytest.mark.parametrize("n", [10, 1000, 100_003])
def test_position_and_value_are_uncorrelated(n: int) -> None:
    """Pearson's r between j and where it goes, over one pass (or 20,000 positions of a big
    one), within 4 standard errors of 0; and over many passes for a small n."""
    count = min(n, 20_000)
    rows = max(1, 20_000 // n)
    orders = passes(n, rows)[:, :count].astype(np.float64)
    positions = np.tile(np.arange(count, dtype=np.float64), rows)
    r = np.corrcoef(positions, orders.reshape(-1))[0, 1]
    assert abs(r) < 4 / np.sqrt(positions.size)


def test_the_key_is_used_whole() -> None:
    """Keys that differ only in their top bit, or only in their lowest, give other orders."""
    n = 1000
    base = np.uint64(0x0123456789ABCDEF)
    orders = [
        permute(np.arange(n), np.full(n, n), np.full(n, key)).tolist()
        for key in (base, base ^ np.uint64(1 << 63), base ^ np.uint64(1))
    ]
    assert orders[0] != orders[1]
    assert orders[0] != orders[2]
    assert orders[1] != orders[2]
