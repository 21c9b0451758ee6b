"""output="jax": batches as JAX arrays (a copy into JAX's buffers), structure and values kept."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import flowloader as fl

HAS_JAX = importlib.util.find_spec("jax") is not None


def samples(n: int = 10) -> list[dict]:
    return [
        {
            "image": np.full((3, 4, 4), i, np.uint8),
            "x": np.arange(5, dtype=np.float32) * i,
            "label": i,
            "name": f"s{i}",
        }
        for i in range(n)
    ]


@pytest.mark.skipif(HAS_JAX, reason="jax is installed")
def test_jax_output_without_jax_names_the_fix() -> None:
    with pytest.raises(ImportError, match="pip install jax"):
        fl.DataLoader(samples(), output="jax")


@pytest.mark.skipif(not HAS_JAX, reason="needs jax")
# "forkserver": no fork in a process where JAX runs threads (pyproject silences JAX's warning
# about the default fork: the workers never call JAX).
@pytest.mark.parametrize(("num_workers", "context"), [(0, None), (2, None), (2, "forkserver")])
def test_jax_batches_keep_dtype_shape_structure_and_values(num_workers, context) -> None:
    import jax

    loader = fl.DataLoader(
        samples(),
        batch_size=4,
        num_workers=num_workers,
        multiprocessing_context=context,
        output="jax",
    )
    plain = list(fl.DataLoader(samples(), batch_size=4))
    for got, expected in zip(loader, plain, strict=True):
        assert isinstance(got["image"], jax.Array)
        assert got["image"].dtype == np.uint8
        assert got["image"].shape == expected["image"].shape
        assert got["x"].dtype == np.float32
        assert got["name"] == expected["name"]  # strings stay Python lists
        for key in ("image", "x", "label"):
            np.testing.assert_array_equal(np.asarray(got[key]), expected[key])


@pytest.mark.skipif(not HAS_JAX, reason="needs jax")
def test_jax_batches_outlive_the_shared_memory_they_came_from() -> None:
    """A JAX array owns its buffer: workers reusing a batch's shared memory cannot change it."""
    loader = fl.DataLoader(samples(40), batch_size=4, num_workers=2, output="jax")
    batches = list(loader)
    for k, batch in enumerate(batches):
        np.testing.assert_array_equal(np.asarray(batch["label"]), np.arange(4 * k, 4 * k + 4))
