"""The vision planner: how it reads a pipeline, and that every planned path gives what the
steps give one by one, with the same random draws from the generators handed in."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from flowloader.vision import transforms as T
from flowloader.vision.plan import BatchWriter, Plan, plan_for

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
PIXELS = np.random.default_rng(0).integers(0, 256, (6, 30, 40, 3), dtype=np.uint8)


def step_by_step(steps, img, rng):
    for step in steps:
        img = step(img, rng) if getattr(step, "takes_rng", False) else step(img)
    return img


def test_a_pipeline_is_read_as_head_flips_and_conversion() -> None:
    crop, flip, to_tensor, normalize = (
        T.RandomCrop(20),
        T.RandomHorizontalFlip(),
        T.ToTensor(),
        T.Normalize(MEAN, STD),
    )
    plan = Plan([crop, flip, to_tensor, normalize])
    assert plan.head == (crop,)
    assert plan.flips == (flip,)
    assert (plan.conversion, plan.normalize) == ("normalized", normalize)
    assert plan.batchable
    assert not Plan([crop, T.Lambda(lambda x: x), T.ToTensor()]).batchable
    assert Plan([flip, T.PILToTensor()]).batchable
    assert Plan([T.PILToTensor()]).conversion == "uint8"
    assert Plan([T.ToTensor()]).conversion == "float"
    no_conversion = Plan([flip, T.Resize(10)])
    assert no_conversion.conversion is None
    assert no_conversion.flips == ()
    assert plan_for(None).steps == ()
    assert plan_for(to_tensor).steps == (to_tensor,)


def test_the_plan_follows_a_compose_whose_steps_change() -> None:
    pipeline = T.Compose([T.ToTensor()])
    assert plan_for(pipeline) is plan_for(pipeline)
    pipeline.transforms.append(T.Normalize(MEAN, STD))
    assert plan_for(pipeline).conversion == "normalized"


@pytest.mark.parametrize(
    "steps",
    [
        lambda: [
            T.RandomHorizontalFlip(),
            T.RandomVerticalFlip(),
            T.ToTensor(),
            T.Normalize(MEAN, STD),
        ],
        lambda: [T.RandomResizedCrop(16), T.RandomHorizontalFlip(0.7), T.PILToTensor()],
        lambda: [T.ColorJitter(0.4, 0.4), T.RandomCrop(12), T.ToTensor()],
        lambda: [T.RandomHorizontalFlip(), T.Resize(8)],
    ],
    ids=["flips-normalized", "crop-flip-uint8", "jitter-crop-float", "no-conversion"],
)
def test_one_image_through_the_plan_is_the_steps_one_by_one(steps) -> None:
    for k, pixels in enumerate(PIXELS):
        image = Image.fromarray(pixels)
        planned = T.Compose(steps())(image, np.random.default_rng(k))
        plain = step_by_step(steps(), image, np.random.default_rng(k))
        np.testing.assert_array_equal(np.asarray(planned), np.asarray(plain))


def test_a_stack_draws_each_images_flips_from_its_own_generator() -> None:
    plan = Plan([T.RandomHorizontalFlip(), T.RandomVerticalFlip(0.3), T.ToTensor()])
    rngs = [np.random.default_rng(100 + k) for k in range(len(PIXELS))]
    stacked = plan.apply_to_stack(PIXELS.copy(), rngs, np.empty)
    rngs = [np.random.default_rng(100 + k) for k in range(len(PIXELS))]
    one_by_one = [plan.apply(Image.fromarray(p), rng) for p, rng in zip(PIXELS, rngs, strict=True)]
    np.testing.assert_array_equal(stacked, np.stack(one_by_one))


def test_a_stack_with_a_shared_generator_draws_in_sample_order() -> None:
    shared = np.random.default_rng(5)
    plan = Plan([T.RandomHorizontalFlip(rng=shared), T.RandomVerticalFlip(), T.PILToTensor()])
    np.random.seed(3)
    stacked = plan.apply_to_stack(PIXELS.copy(), None, np.empty)
    shared, expected = np.random.default_rng(5), []
    np.random.seed(3)
    steps = [T.RandomHorizontalFlip(rng=shared), T.RandomVerticalFlip(), T.PILToTensor()]
    for pixels in PIXELS:
        expected.append(step_by_step(steps, Image.fromarray(pixels), None))
    np.testing.assert_array_equal(stacked, np.stack(expected))


def test_the_batch_writer_falls_back_to_separate_images_when_sizes_differ() -> None:
    plan = Plan([T.ToTensor(), T.Normalize(MEAN, STD)])
    writer = BatchWriter(plan, 3, np.empty)
    images = [Image.fromarray(PIXELS[0]), Image.fromarray(PIXELS[1]), Image.new("RGB", (5, 4))]
    for image in images:
        writer.add(image)
    result = writer.result()
    assert isinstance(result, list)
    assert result[2].shape == (3, 4, 5)
    for image, out in zip(images, result, strict=True):
        np.testing.assert_array_equal(out, T.Normalize(MEAN, STD)(T.ToTensor()(image)))


def test_the_batch_writer_converts_into_the_array_it_is_given() -> None:
    given = []

    def allocate(shape, dtype):
        given.append(np.zeros(shape, dtype))
        return given[-1]

    writer = BatchWriter(Plan([T.PILToTensor()]), 2, allocate)
    writer.add(Image.fromarray(PIXELS[0]))
    writer.add(Image.fromarray(PIXELS[1]))
    assert writer.result() is given[0]
    np.testing.assert_array_equal(given[0], PIXELS[:2].transpose(0, 3, 1, 2))
