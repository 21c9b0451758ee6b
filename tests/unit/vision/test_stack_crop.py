"""The batch plan's crop and flips as one native pass (flowloader.vision.stack_crop): for
random crops (constant padding, windows partly or wholly outside the image), flips, image
shapes and memory layouts, uint8 or through the conversion's table, a batch is bit for bit
the per-sample path's; rows are indexed as NumPy indexes them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowloader.vision import native
from flowloader.vision import transforms as T
from flowloader.vision.stack_plan import compile_stack

from .test_batch_augment import (
    MEAN,
    PADDINGS,
    STD,
    InMemory,
    assert_same_bits,
    batched,
    per_sample,
    random_images,
)

needs_crop = pytest.mark.skipif(
    not native.can_crop(),
    reason=f"native.crop does not run: {native.unavailable_reason() or 'an older build'}",
)


@st.composite
def crop_and_flips(draw: Any, channels: int) -> list[Any]:
    """A crop with constant padding (or none), then flips, then a conversion."""
    steps: list[Any] = []
    kind = draw(st.sampled_from(["random", "center", "none"]))
    size = (draw(st.integers(1, 14)), draw(st.integers(1, 14)))
    if kind == "random":
        padding = draw(PADDINGS)
        fill = draw(st.integers(0, 255)) if channels == 1 else (9, 200, 77, 3)[:channels]
        steps.append(T.RandomCrop(size, padding=padding, fill=fill))
    elif kind == "center":
        steps.append(T.CenterCrop(size))
    for _ in range(draw(st.integers(0 if kind != "none" else 1, 3))):
        p = draw(st.sampled_from([0.0, 0.5, 1.0]))
        flip = draw(st.sampled_from([T.RandomHorizontalFlip, T.RandomVerticalFlip]))
        steps.append(flip(p))
    ending = draw(st.sampled_from(["uint8", "float", "normalized"]))
    steps.append(T.PILToTensor() if ending == "uint8" else T.ToTensor())
    if ending == "normalized":
        steps.append(
            T.Normalize(
                MEAN[:channels] if channels == 3 else MEAN[:1] * channels, STD[:1] * channels
            )
        )
    return steps


@needs_crop
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_fused_crop_is_the_per_sample_path_bit_for_bit(data) -> None:
    channels, pixels = random_images(data, 2)
    if data.draw(st.booleans(), label="strided"):  # every other column of a wider array
        _, height, width = pixels.shape[:3]
        wide = np.zeros((9, height, 2 * width, *pixels.shape[3:]), np.uint8)
        wide[:, :, ::2] = pixels
        pixels = wide[:, :, ::2]
    steps = data.draw(crop_and_flips(channels), label="steps")
    dataset = InMemory(pixels, T.Compose(steps))
    plan = compile_stack(steps, pixels.shape[1:])
    indices = data.draw(st.lists(st.integers(0, 8), min_size=1, max_size=16), label="indices")
    seed = data.draw(st.integers(0, 2**63 - 1), label="seed")
    try:
        expected = per_sample(dataset, indices, seed)
    except ValueError:  # a crop larger than the image: the per-sample path's error
        assert isinstance(plan, str)
        return
    assert not isinstance(plan, str), plan
    assert plan.fused is not None
    assert_same_bits(batched(dataset, indices, seed), expected)


@needs_crop
def test_the_cifar_recipe_is_fused_and_rows_are_indexed_as_numpy_does() -> None:
    pixels = np.random.default_rng(3).integers(0, 256, (20, 32, 32, 3), np.uint8)
    steps = [T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(), T.PILToTensor()]
    dataset = InMemory(pixels, T.Compose(steps))
    plan = compile_stack(steps, (32, 32, 3))
    assert not isinstance(plan, str)
    assert plan.fused is not None
    rows = [-1, 0, -20, 19]
    assert_same_bits(batched(dataset, rows, 5), per_sample(dataset, rows, 5))
    out = np.empty((1, 3, 32, 32), np.uint8)
    with pytest.raises(IndexError, match="index 20 is out of bounds"):
        plan.run_rows(pixels, np.array([20]), lambda shape, dtype: out)


def test_steps_that_are_not_a_crop_and_flips_are_not_fused() -> None:
    for steps in (
        [T.RandomCrop(8, padding=2, padding_mode="reflect"), T.PILToTensor()],
        [T.RandomHorizontalFlip(), T.RandomCrop(8), T.PILToTensor()],  # a flip first
        [T.RandomCrop(8), T.PILToTensor(), T.RandomErasing(1.0)],  # a step after
        [T.PILToTensor()],  # nothing to crop: the table path or a copy
    ):
        plan = compile_stack(steps, (10, 10, 3))
        assert not isinstance(plan, str)
        assert plan.fused is None, steps


@needs_crop
def test_the_kernel_refuses_what_it_was_not_made_for() -> None:
    pixels = np.zeros((2, 3, 4, 4), np.uint8)
    out = np.empty((1, 3, 2, 2), np.uint8)
    one, flips, fill = np.zeros(1, np.int64), np.zeros(1, np.uint8), np.zeros(3, np.uint8)
    with pytest.raises(ValueError, match="beyond 2"):
        native.crop(pixels, one, (np.array([2**41]), one), flips, fill, (0, 0), out)
    with pytest.raises(ValueError, match="paddings of 0"):
        native.crop(pixels, one, (one, one), flips, fill, (-1, 0), out)
    with pytest.raises(ValueError, match="float32 table"):  # float out without a table
        native.crop(pixels, one, (one, one), flips, fill, (0, 0), out.astype(np.float32))
    with pytest.raises(IndexError, match="index -3 is out of bounds"):
        native.crop(pixels, np.array([-3]), (one, one), flips, fill, (0, 0), out)
