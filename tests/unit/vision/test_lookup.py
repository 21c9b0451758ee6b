"""The conversion and the Normalize steps after it, folded into one table of each channel's
256 results (flowloader.vision.native.lookup): bit for bit the NumPy operations of the
per-sample path, on grey and RGB stacks, contiguous or not."""

from __future__ import annotations

import numpy as np
import pytest

from flowloader.batching import allocate_empty
from flowloader.vision import native
from flowloader.vision import transforms as T
from flowloader.vision.stack_plan import StackPlan, compile_stack

from .test_batch_augment import InMemory, assert_same_bits, batched, per_sample

needs_kernel = pytest.mark.skipif(
    not native.lookup(
        np.zeros((1, 1, 1, 1), np.uint8),
        np.zeros((1, 256), np.float32),
        np.zeros((1, 1, 1, 1), np.float32),
    ),
    reason=f"the native lookup does not run: {native.unavailable_reason() or 'an older build'}",
)

PIPELINES = {
    "ToTensor": [T.ToTensor()],
    "ToTensor + Normalize": [T.ToTensor(), T.Normalize((0.1307,), (0.3081,))],
    "twice": [T.ToTensor(), T.Normalize((0.5,), (0.25,)), T.Normalize((-0.1,), (3.0,))],
    "v2 scaled": [T.PILToTensor(), T.ToDtype(np.float32, scale=True), T.Normalize((0.2,), (0.7,))],
    "then flip": [T.ToTensor(), T.Normalize((0.4,), (0.2,)), T.RandomHorizontalFlip()],
}


def rgb(steps: list) -> list:
    return [
        T.Normalize((0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261))
        if isinstance(step, T.Normalize)
        else step
        for step in steps
    ]


@needs_kernel
@pytest.mark.parametrize("name", list(PIPELINES))
@pytest.mark.parametrize("shape", [(11, 9), (8, 7, 3)])
def test_the_table_gives_the_per_sample_bits(name, shape) -> None:
    steps = PIPELINES[name] if len(shape) == 2 else rgb(PIPELINES[name])
    pixels = np.random.default_rng(4).integers(0, 256, (30, *shape), np.uint8)
    pixels[0] = 0
    pixels[1] = 255  # every value of the table's ends
    dataset = InMemory(pixels, T.Compose(steps))
    stack = compile_stack(steps, shape)
    assert isinstance(stack, StackPlan)
    assert stack.table is not None
    indices = [5, 0, 1, 29, 7, 7, 12]
    assert_same_bits(batched(dataset, indices, 3), per_sample(dataset, indices, 3))


@needs_kernel
def test_every_value_of_every_channel_is_numpy_s() -> None:
    steps = [T.ToTensor(), T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))]
    stack = compile_stack(steps, (1, 256, 3))
    assert isinstance(stack, StackPlan)
    values = np.broadcast_to(np.arange(256, dtype=np.uint8)[None, None, :, None], (2, 1, 256, 3))
    got = stack.run(values.copy(), None, allocate_empty)  # channels last: a strided stack
    chw = values.transpose(0, 3, 1, 2).astype(np.float32)
    want = (np.divide(chw, np.float32(255)) - stack.array_ops[0].mean) / stack.array_ops[0].std
    assert_same_bits(got, want.astype(np.float32))


def test_a_mean_per_pixel_is_not_folded() -> None:
    mean = np.linspace(0, 1, 16, dtype=np.float32).reshape(1, 4, 4)
    steps = [T.ToTensor(), T.Normalize(mean, (0.5,))]
    stack = compile_stack(steps, (4, 4))
    assert isinstance(stack, StackPlan)
    assert stack.folded == 0  # the conversion alone is tabled; Normalize runs after it
    dataset = InMemory(np.random.default_rng(1).integers(0, 256, (6, 4, 4), np.uint8))
    dataset.transform = T.Compose(steps)
    assert_same_bits(batched(dataset, [3, 1, 4], 0), per_sample(dataset, [3, 1, 4], 0))
    cast = compile_stack([T.PILToTensor(), T.ToDtype(np.float32)], (4, 4))
    assert isinstance(cast, StackPlan)
    assert cast.table is None  # a bare cast is cheaper than the table


@needs_kernel
def test_lookup_refuses_arrays_that_do_not_fit() -> None:
    pixels = np.zeros((2, 1, 3, 3), np.uint8)
    table = np.zeros((1, 256), np.float32)
    out = np.empty((2, 1, 3, 3), np.float32)
    assert native.lookup(pixels, table, out)
    for bad in (
        (pixels.astype(np.int16), table, out),
        (pixels, np.zeros((2, 256), np.float32), out),
        (pixels, table, np.empty((2, 1, 3, 4), np.float32)),
        (pixels, table, out.astype(np.float64)),
        (pixels[0], table, out[0]),
    ):
        with pytest.raises(ValueError, match="lookup expects"):
            native.lookup(*bad)
    with pytest.raises(ValueError, match="not C-contiguous"):
        native.lookup(pixels, table, out.transpose(0, 1, 3, 2))  # not C-contiguous


@needs_kernel
@pytest.mark.parametrize("view", ["whole", "rows apart", "columns apart", "channels last"])
def test_lookup_reads_any_layout_of_the_pixels(view) -> None:
    pixels = np.random.default_rng(2).integers(0, 256, (3, 2, 13, 21), np.uint8)
    stack = {
        "whole": pixels,
        "rows apart": pixels[:, :, 1:-2, 3:],  # each row a run of its own
        "columns apart": pixels[:, :, :, ::2],
        "channels last": np.ascontiguousarray(pixels.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2),
    }[view]
    table = np.random.default_rng(3).random((2, 256), dtype=np.float32)
    out = np.empty(stack.shape, np.float32)
    assert native.lookup(stack, table, out)
    want = np.stack([table[c][stack[:, c]] for c in range(2)], axis=1)
    assert_same_bits(out, want)


def mnist_like(count: int = 12) -> InMemory:
    pixels = np.random.default_rng(6).integers(0, 256, (count, 5, 6), np.uint8)
    return InMemory(pixels, T.Compose([T.ToTensor(), T.Normalize((0.1307,), (0.3081,))]))


@pytest.mark.parametrize("native_on", ["1", "0"])
def test_the_gather_writes_the_batch_where_the_table_is_the_whole_pipeline(
    native_on, monkeypatch
) -> None:
    monkeypatch.setenv("FLOWLOADER_NATIVE", native_on)
    dataset = mnist_like()
    stack = compile_stack(dataset.transform.transforms, (5, 6))
    assert isinstance(stack, StackPlan)
    assert stack.table_only
    indices = [3, -1, 0, 11, -12, 3]  # negative ones count from the end, as NumPy's do
    assert_same_bits(batched(dataset, indices, 0), per_sample(dataset, indices, 0))
    with pytest.raises(IndexError, match="out of bounds"):
        dataset.__getitems__([1, 12])


@needs_kernel
def test_lookup_checks_its_rows() -> None:
    pixels = np.zeros((4, 1, 2, 2), np.uint8)
    table = np.zeros((1, 256), np.float32)
    out = np.empty((2, 1, 2, 2), np.float32)
    assert native.lookup(pixels, table, out, np.array([3, -4]))
    for rows in ([4, 0], [0, -5]):
        with pytest.raises(IndexError, match="out of bounds for axis 0 with size 4"):
            native.lookup(pixels, table, out, np.array(rows, np.int64))
    with pytest.raises(ValueError, match="1-D int64"):
        native.lookup(pixels, table, out, np.array([0, 1], np.int32))
    with pytest.raises(ValueError, match="len\\(rows\\)"):
        native.lookup(pixels, table, out, np.array([0, 1, 2]))


def test_a_plan_that_draws_or_works_on_pixels_is_not_the_table_alone() -> None:
    for steps in (
        [T.RandomHorizontalFlip(), T.ToTensor()],
        [T.ToTensor(), T.RandomErasing(value=0)],
        [T.PILToTensor()],
    ):
        stack = compile_stack(steps, (5, 6))
        assert isinstance(stack, StackPlan)
        assert not stack.table_only
