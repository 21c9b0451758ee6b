"""The augmentations (RandomAffine, RandomRotation, RandomErasing, RandomGrayscale, ToDtype,
MixUp, CutMix) against torchvision's recorded outputs (golden/make_augment_golden.py), and
their draws, arguments and errors.

Exact for PIL images (the same Pillow calls with the same float64 matrix), erase, ToDtype,
MixUp and CutMix. On arrays the affine sampling is torchvision's arithmetic re-done in NumPy
(float32): held to AFFINE_ARRAY_TOLERANCE, except where a sampling point lies within float
rounding of a pixel boundary (nearest), counted by AFFINE_NEAREST_MISSES.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

from flowloader.batching import batch_context, batch_generator
from flowloader.vision import transforms as T
from flowloader.vision.transforms import InterpolationMode
from flowloader.vision.transforms import functional as F

GOLDEN = np.load(os.path.join(os.path.dirname(__file__), "golden", "augment_golden.npz"))
RGB = Image.fromarray(GOLDEN["input_rgb"])
GRAY = Image.fromarray(GOLDEN["input_gray"], "L")
TENSOR = GOLDEN["input_tensor"]
BATCH, LABELS = GOLDEN["input_batch"], GOLDEN["input_labels"]
NEAREST, BILINEAR = InterpolationMode.NEAREST, InterpolationMode.BILINEAR

AFFINE_ARRAY_TOLERANCE = 1e-5  # bilinear, float32 arithmetic in another order
AFFINE_NEAREST_MISSES = 0.01  # at most this share of pixels may take a neighbour's value

AFFINES = {
    "rotate": (30.0, [0, 0], 1.0, [0.0, 0.0], None),
    "all": (-17.5, [2, -1], 1.2, [8.0, -4.0], None),
    "center": (45.0, [1, 1], 0.8, [0.0, 10.0], [3, 4]),
}
IMAGES = {
    "rgb": (RGB, [10, 200, 30]),
    "gray": (GRAY, 0),
    "tensor": (TENSOR, [0.25, 0.5, 0.75]),
}


def close(name: str, got: np.ndarray, nearest: bool) -> None:
    expected = GOLDEN[f"out_{name}"]
    assert got.shape == expected.shape
    if nearest:
        assert np.mean(np.abs(got - expected) > 1e-6) <= AFFINE_NEAREST_MISSES
    else:
        np.testing.assert_allclose(got, expected, atol=AFFINE_ARRAY_TOLERANCE)


@pytest.mark.parametrize("affine", sorted(AFFINES))
@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
@pytest.mark.parametrize("image", sorted(IMAGES))
def test_affine_is_torchvisions(affine, mode, image) -> None:
    angle, translate, scale, shear, center = AFFINES[affine]
    img, fill = IMAGES[image]
    interpolation = NEAREST if mode == "nearest" else BILINEAR
    got = np.asarray(F.affine(img, angle, translate, scale, shear, interpolation, fill, center))
    name = f"affine_{affine}_{mode}_{image}"
    if image == "tensor":
        close(name, got, mode == "nearest")
    else:  # PIL: the same Pillow call, exactly
        np.testing.assert_array_equal(got, GOLDEN[f"out_{name}"])


@pytest.mark.parametrize("expand", [False, True])
@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_rotate_is_torchvisions(expand, mode) -> None:
    interpolation = NEAREST if mode == "nearest" else BILINEAR
    suffix = f"{'expand' if expand else 'same'}_{mode}"
    got = np.asarray(F.rotate(RGB, 33.0, interpolation, expand, None, [5, 6, 7]))
    np.testing.assert_array_equal(got, GOLDEN[f"out_rotate_{suffix}_rgb"])
    got = F.rotate(TENSOR, 33.0, interpolation, expand, None, [0.5])
    close(f"rotate_{suffix}_tensor", got, mode == "nearest")
    got = np.asarray(F.rotate(RGB, -60.0, NEAREST, False, [2, 3], None))
    np.testing.assert_array_equal(got, GOLDEN["out_rotate_center_rgb"])


def test_erase_grayscale_and_to_dtype_are_torchvisions() -> None:
    erased = F.erase(TENSOR, 2, 3, 5, 7, np.array([0.1, 0.2, 0.3], np.float32)[:, None, None])
    np.testing.assert_array_equal(erased, GOLDEN["out_erase_tensor"])
    assert not np.shares_memory(erased, TENSOR)
    gray = np.asarray(T.RandomGrayscale(p=1.0)(RGB))
    np.testing.assert_array_equal(gray, GOLDEN["out_grayscale_p1_rgb"])
    uint8 = np.ascontiguousarray(GOLDEN["input_rgb"].transpose(2, 0, 1))
    np.testing.assert_array_equal(
        T.ToDtype(np.float32, scale=True)(uint8), GOLDEN["out_to_dtype_scaled"]
    )
    np.testing.assert_array_equal(T.ToDtype("float32")(uint8), GOLDEN["out_to_dtype_unscaled"])
    np.testing.assert_array_equal(
        T.ToDtype(np.uint8, scale=True)(TENSOR), GOLDEN["out_to_dtype_back"]
    )
    assert T.ToDtype(np.float32)(RGB) is RGB  # v2 passes PIL images through


def test_mixup_and_cutmix_mix_as_torchvision_does() -> None:
    mixup, cutmix = T.MixUp(num_classes=5), T.CutMix(num_classes=5)
    params = {"lam": 0.3}
    np.testing.assert_allclose(mixup._mix(BATCH, params), GOLDEN["out_mixup_images"], atol=1e-7)
    np.testing.assert_allclose(
        mixup._mixed_labels(LABELS, 0.3), GOLDEN["out_mixup_labels"], atol=1e-7
    )
    params = {"box": (1, 2, 5, 6), "lam_adjusted": 0.4}
    np.testing.assert_array_equal(cutmix._mix(BATCH, params), GOLDEN["out_cutmix_images"])
    np.testing.assert_allclose(
        cutmix._mixed_labels(LABELS, 0.4), GOLDEN["out_cutmix_labels"], atol=1e-7
    )


def test_mixup_and_cutmix_draw_once_a_batch_from_the_generator_given() -> None:
    images, labels = BATCH.copy(), LABELS.copy()
    mixed, soft = T.MixUp(alpha=0.5, num_classes=5)(images, labels, rng=np.random.default_rng(1))
    lam = np.random.default_rng(1).beta(0.5, 0.5)
    np.testing.assert_allclose(mixed, np.roll(images, 1, 0) * (1 - lam) + images * lam, rtol=1e-6)
    assert soft.shape == (4, 5)
    np.testing.assert_allclose(soft.sum(axis=1), 1.0, rtol=1e-6)
    cut, soft = T.CutMix(num_classes=5)(images, labels, rng=np.random.default_rng(2))
    changed = np.any(cut != images, axis=(0, 1))  # the box, the same for every image
    kept = 1.0 - changed.sum() / changed.size
    assert soft[0, labels[0]] == pytest.approx(kept, abs=0.3)
    np.testing.assert_allclose(soft.sum(axis=1), 1.0, rtol=1e-6)


def test_mixing_at_collate_draws_from_the_batchs_own_generator() -> None:
    from flowloader.randomness import SampleSeeds

    samples = [(BATCH[k], int(LABELS[k])) for k in range(4)]
    mixup = T.MixUp(num_classes=5)
    with batch_context(SampleSeeds(9), 3):  # what the loader enters around collate_fn
        first = mixup.collate(samples)
    with batch_context(SampleSeeds(9), 3):
        again = mixup.collate(samples)
    np.testing.assert_array_equal(first[0], again[0])
    lam = batch_generator(9, 3).beta(1.0, 1.0)
    np.testing.assert_allclose(first[1][0, LABELS[0]], lam, rtol=1e-6)
    # Outside a loader's collate step: the global RNG.
    np.random.seed(0)
    plain = mixup.collate(samples)
    np.random.seed(0)
    np.testing.assert_array_equal(plain[0], mixup.collate(samples)[0])


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: T.MixUp(num_classes=5)(BATCH, LABELS[:3]), ValueError, "does not match"),
        (lambda: T.MixUp()(BATCH, LABELS), ValueError, "num_classes must be passed"),
        (lambda: T.MixUp(num_classes=4)(BATCH, np.eye(5)[LABELS]), ValueError, "must match"),
        (lambda: T.MixUp(num_classes=5)(BATCH, LABELS[:, None, None]), ValueError, "index based"),
        (lambda: T.MixUp(num_classes=5)(BATCH, [1, 2]), ValueError, "must be a NumPy array"),
        (lambda: T.MixUp(num_classes=5)(BATCH), ValueError, "Could not infer"),
        (lambda: T.MixUp(num_classes=5)(BATCH[0], LABELS[:3]), ValueError, "4 dims"),
        (
            lambda: T.MixUp(num_classes=5)((BATCH * 255).astype(np.uint8), LABELS),
            TypeError,
            "float images",
        ),
        (lambda: T.MixUp(alpha=0), ValueError, "alpha should be positive"),
        (lambda: T.CutMix(labels_getter="labels"), ValueError, "labels_getter"),
        (lambda: T.RandomErasing(value="noise"), ValueError, "should be 'random'"),
        (lambda: T.RandomErasing(value={}), TypeError, "Argument value"),
        (lambda: T.RandomErasing(scale=(0.1, 1.5)), ValueError, "between 0 and 1"),
        (lambda: T.RandomErasing(p=2), ValueError, "probability"),
        (lambda: T.RandomErasing(scale=0.3), TypeError, "Scale should be a sequence"),
        (lambda: T.RandomErasing(ratio=0.3), TypeError, "Ratio should be a sequence"),
        (lambda: T.RandomErasing(p=1, value=[1, 2])(TENSOR), ValueError, "single value or 3"),
        (lambda: T.RandomErasing()(RGB), TypeError, "NumPy array"),
        (lambda: T.RandomAffine(-5), ValueError, "must be positive"),
        (lambda: T.RandomAffine(5, translate=(0.1, 2)), ValueError, "between 0 and 1"),
        (lambda: T.RandomAffine(5, scale=(0, 1)), ValueError, "positive"),
        (lambda: T.RandomAffine(5, shear=(1, 2, 3)), ValueError, "length 2 or 4"),
        (lambda: T.RandomAffine((1,)), ValueError, "length 2"),
        (lambda: T.RandomAffine(5, fill=object()), TypeError, "Fill should be"),
        (lambda: T.RandomRotation(5, center=3), TypeError, "center should be a sequence"),
        (lambda: F.affine(RGB, "5", [0, 0], 1.0, 0.0), TypeError, "angle"),
        (lambda: F.affine(RGB, 5, 3, 1.0, 0.0), TypeError, "translate should be a sequence"),
        (lambda: F.affine(RGB, 5, [1], 1.0, 0.0), ValueError, "length 2"),
        (lambda: F.affine(RGB, 5, [0, 0], 0.0, 0.0), ValueError, "scale should be positive"),
        (lambda: F.affine(RGB, 5, [0, 0], 1.0, "x"), TypeError, "Shear should be"),
        (lambda: F.affine(RGB, 5, [0, 0], 1.0, [1, 2, 3]), ValueError, "two values"),
        (lambda: F.affine(RGB, 5, [0, 0], 1.0, 0.0, center=3), TypeError, "center"),
        (lambda: F.affine(RGB, 5, [0, 0], 1.0, 0.0, fill=[1, 2]), ValueError, "'fill'"),
        (lambda: F.affine(TENSOR, 5, [0, 0], 1.0, 0.0, fill=[1, 2]), ValueError, "'fill'"),
        (
            lambda: F.affine(TENSOR, 5, [0, 0], 1.0, 0.0, InterpolationMode.BICUBIC),
            ValueError,
            "unsupported",
        ),
        (lambda: F.rotate(RGB, "5"), TypeError, "angle"),
        (lambda: F.rotate(RGB, 5, center=3), TypeError, "center"),
        (lambda: F.erase(RGB, 0, 0, 1, 1, 0), TypeError, "NumPy array"),
        (lambda: T.ToDtype("no-such-type"), TypeError, "dtype should be"),
        (lambda: F.to_dtype([1], np.float32), TypeError, "NumPy array"),
        (lambda: F.to_dtype(TENSOR, np.int64, scale=True), TypeError, "not supported"),
        (lambda: F.to_dtype(TENSOR.astype(np.int64), np.float32, True), TypeError, "supported"),
    ],
)
def test_arguments_and_inputs_are_checked_as_torchvision_checks_them(make, error, match) -> None:
    with pytest.raises(error, match=match):
        make()


def test_random_affine_and_rotation_draw_in_torchvisions_order() -> None:
    affine = T.RandomAffine(20, translate=(0.2, 0.1), scale=(0.8, 1.2), shear=(-5, 5, -3, 3))
    drawn = affine.get_params(
        affine.degrees, affine.translate, affine.scale, affine.shear, [19, 15],
        np.random.default_rng(3),
    )  # fmt: skip
    draw = np.random.default_rng(3)
    angle = draw.uniform(-20, 20)
    tx, ty = round(draw.uniform(-3.8, 3.8)), round(draw.uniform(-1.5, 1.5))
    scale = draw.uniform(0.8, 1.2)
    shear = (draw.uniform(-5, 5), draw.uniform(-3, 3))
    assert drawn == (angle, (tx, ty), scale, shear)
    out = affine(RGB, np.random.default_rng(3))
    expected = F.affine(RGB, angle, [tx, ty], scale, list(shear), NEAREST, 0)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(expected))
    rotation = T.RandomRotation((10, 40), BILINEAR, expand=True, fill=3)
    out = rotation(TENSOR, np.random.default_rng(4))
    angle = np.random.default_rng(4).uniform(10, 40)
    np.testing.assert_array_equal(out, F.rotate(TENSOR, angle, BILINEAR, True, None, 3))
    assert "degrees=[10.0, 40.0]" in repr(rotation)


def test_random_erasing_draws_a_box_that_fits_or_leaves_the_image() -> None:
    erasing = T.RandomErasing(p=1.0, value=(1, 2, 3))
    for seed in range(20):
        out = erasing(TENSOR, np.random.default_rng(seed))
        changed = np.any(out != TENSOR, axis=0)
        rows, cols = np.nonzero(changed)
        assert len(rows)
        box = out[:, rows.min() : rows.max() + 1, cols.min() : cols.max() + 1]
        np.testing.assert_array_equal(
            box, np.broadcast_to(np.array([1, 2, 3.0])[:, None, None], box.shape)
        )
    noisy = T.RandomErasing(p=1.0, value="random", scale=(0.3, 0.3), ratio=(1, 1))(
        TENSOR, np.random.default_rng(0)
    )
    assert np.any(noisy < 0)  # standard normal noise
    untouched = T.RandomErasing(p=1.0, scale=(0.99, 1.0), ratio=(1, 1))
    np.testing.assert_array_equal(untouched(TENSOR, np.random.default_rng(0)), TENSOR)
    assert T.RandomErasing(p=0.0)(TENSOR) is TENSOR
    inplace = TENSOR.copy()
    assert T.RandomErasing(p=1.0, inplace=True)(inplace, np.random.default_rng(1)) is inplace
    with pytest.warns(UserWarning, match="min, max"):
        T.RandomErasing(scale=(0.3, 0.1))


def test_random_grayscale_keeps_the_channels_and_draws_once() -> None:
    gray = T.RandomGrayscale(p=0.5)
    outs = [np.asarray(gray(RGB, np.random.default_rng(seed))) for seed in range(8)]
    flags = [np.random.default_rng(seed).random() < 0.5 for seed in range(8)]
    for out, grayed in zip(outs, flags, strict=True):
        assert out.shape == (15, 19, 3)
        assert np.array_equal(out[..., 0], out[..., 2]) == grayed
    np.testing.assert_array_equal(
        np.asarray(gray(GRAY, np.random.default_rng(0))), GOLDEN["input_gray"]
    )
