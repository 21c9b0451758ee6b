"""Transform classes: arguments, randomness, batch paths."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from flowloader.vision import transforms as T
from flowloader.vision.transforms import functional as F

IMAGE = Image.fromarray(np.random.default_rng(0).integers(0, 256, (30, 40, 3), dtype=np.uint8))


def test_to_tensor_and_pil_to_tensor() -> None:
    tensor = T.ToTensor()(IMAGE)
    assert tensor.shape == (3, 30, 40)
    assert tensor.dtype == np.float32
    assert 0.0 <= tensor.min() <= tensor.max() <= 1.0
    raw = T.PILToTensor()(IMAGE)
    assert raw.dtype == np.uint8
    np.testing.assert_array_equal(raw, np.asarray(IMAGE).transpose(2, 0, 1))
    np.testing.assert_array_equal(T.ToTensor()(np.asarray(IMAGE)), tensor)
    assert T.ToTensor()(np.zeros((4, 5), np.float64)).shape == (1, 4, 5)
    with pytest.raises(TypeError):
        T.ToTensor()("not an image")


def test_to_tensor_other_modes() -> None:
    assert T.ToTensor()(Image.new("1", (3, 2), 1)).max() == 1.0
    assert T.ToTensor()(Image.new("F", (3, 2), 2.5)).dtype == np.float32
    assert T.ToTensor()(Image.new("I", (3, 2), 7)).dtype == np.int32


def test_normalize_errors() -> None:
    with pytest.raises(TypeError, match="float"):
        T.Normalize((0.5,), (0.5,))(np.zeros((1, 2, 2), np.uint8))
    with pytest.raises(ValueError, match=r"\(\.\.\., C, H, W\)"):
        T.Normalize((0.5,), (0.5,))(np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError, match="division by zero"):
        T.Normalize((0.5,), (0.0,))(np.zeros((1, 2, 2), np.float32))


def test_normalize_inplace_and_batches() -> None:
    batch = np.ones((4, 3, 2, 2), np.float32)
    out = F.normalize(batch, (0.5, 0.5, 0.5), (0.5, 0.25, 0.5), inplace=True)
    assert out is batch
    assert out[0, 1, 0, 0] == 2.0


@pytest.mark.parametrize(
    ("size", "max_size", "expected"),
    [(20, None, (20, 26)), ([20], None, (20, 26)), ((10, 15), None, (10, 15)), (20, 24, (18, 24))],
)
def test_resize_sizes(size, max_size, expected) -> None:
    out = T.Resize(size, max_size=max_size)(IMAGE)
    assert (out.height, out.width) == expected


def test_resize_argument_errors() -> None:
    with pytest.raises(TypeError, match="Size should be int or sequence"):
        T.Resize(2.5)
    with pytest.raises(ValueError, match="1 or 2 values"):
        T.Resize((1, 2, 3))
    with pytest.raises(ValueError, match="max_size"):
        T.Resize(20, max_size=20)(IMAGE)
    with pytest.raises(ValueError, match="max_size should only be passed"):
        T.Resize((20, 20), max_size=30)(IMAGE)
    with pytest.raises(TypeError, match="interpolation"):
        T.Resize(10, interpolation="bilinear")


def test_resize_accepts_pil_constants() -> None:
    out = T.Resize(10, interpolation=Image.Resampling.NEAREST)(IMAGE)
    assert out.height == 10


def test_crops() -> None:
    assert T.CenterCrop(10)(IMAGE).size == (10, 10)
    assert T.CenterCrop((50, 60))(IMAGE).size == (60, 50)
    crop = T.RandomCrop(12, rng=np.random.default_rng(0))(IMAGE)
    assert crop.size == (12, 12)
    with pytest.raises(ValueError, match="larger than input image size"):
        T.RandomCrop(64)(IMAGE)
    padded = T.RandomCrop((40, 50), pad_if_needed=True, fill=255)(IMAGE)
    assert padded.size == (50, 40)
    assert T.RandomCrop(30, padding=4, padding_mode="reflect")(IMAGE).size == (30, 30)
    with pytest.raises(ValueError, match="Padding mode"):
        F.pad(IMAGE, 2, padding_mode="wrap")


def test_random_crop_pad_if_needed_keeps_the_image_inside() -> None:
    gray = Image.fromarray(np.full((4, 4), 200, np.uint8), "L")
    out = np.asarray(T.RandomCrop((8, 8), pad_if_needed=True, fill=0)(gray))
    assert out.shape == (8, 8)
    assert (out == 200).sum() == 16  # the whole image survives the crop


def test_random_resized_crop_parameters() -> None:
    rng = np.random.default_rng(1)
    for _ in range(50):
        top, left, h, w = T.RandomResizedCrop.get_params(IMAGE, (0.08, 1.0), (3 / 4, 4 / 3), rng)
        assert 0 <= top <= 30 - h
        assert 0 <= left <= 40 - w
        assert 0.08 * 1200 * 0.5 <= h * w <= 1200
    # Nothing fits: torchvision's fallback is the central crop of the allowed ratio.
    assert T.RandomResizedCrop.get_params(IMAGE, (2.0, 3.0), (1.0, 1.0), rng) == (0, 5, 30, 30)
    with pytest.warns(UserWarning, match="min, max"):
        T.RandomResizedCrop(10, scale=(1.0, 0.5))


def test_random_transforms_are_reproducible_with_an_rng() -> None:
    def run(seed):
        rng = np.random.default_rng(seed)
        pipeline = T.Compose(
            [
                T.RandomResizedCrop(16, rng=rng),
                T.RandomHorizontalFlip(rng=rng),
                T.ColorJitter(0.4, 0.4, 0.4, 0.1, rng=rng),
                T.ToTensor(),
            ]
        )
        return np.stack([pipeline(IMAGE) for _ in range(5)])

    np.testing.assert_array_equal(run(3), run(3))
    assert not np.array_equal(run(3), run(4))


def test_flip_probability() -> None:
    rng = np.random.default_rng(0)
    flips = [T.RandomHorizontalFlip(0.25, rng=rng)(IMAGE) is not IMAGE for _ in range(4000)]
    assert abs(np.mean(flips) - 0.25) < 0.03
    assert T.RandomVerticalFlip(0.0)(IMAGE) is IMAGE


def test_color_jitter_arguments() -> None:
    jitter = T.ColorJitter(brightness=0.5, hue=0.2)
    assert jitter.brightness == [0.5, 1.5]
    assert jitter.hue == [-0.2, 0.2]
    assert jitter.contrast is None
    with pytest.raises(ValueError, match="non negative"):
        T.ColorJitter(brightness=-1)
    with pytest.raises(ValueError, match="between"):
        T.ColorJitter(hue=0.7)
    with pytest.raises(TypeError, match="list/tuple with length 2"):
        T.ColorJitter(contrast=[1, 2, 3])
    out = T.ColorJitter(0.5, 0.5, 0.5, 0.2, rng=np.random.default_rng(0))(IMAGE)
    assert out.size == IMAGE.size


def test_grayscale_and_lambda() -> None:
    assert T.Grayscale()(IMAGE).mode == "L"
    assert T.Grayscale(3)(IMAGE).mode == "RGB"
    assert T.Lambda(lambda x: x.size)(IMAGE) == (40, 30)
    with pytest.raises(TypeError, match="callable"):
        T.Lambda(3)


def test_array_inputs_follow_the_tensor_layout() -> None:
    tensor = T.ToTensor()(IMAGE)
    assert T.CenterCrop(10)(tensor).shape == (3, 10, 10)
    assert T.Resize(15)(tensor).shape == (3, 15, 20)
    np.testing.assert_array_equal(F.hflip(tensor), tensor[:, :, ::-1])
    assert T.Grayscale(3)(tensor).shape == (3, 30, 40)


def test_repr() -> None:
    text = repr(T.Compose([T.Resize(10), T.Normalize((0.5,), (0.2,))]))
    assert "Resize(size=10" in text
    assert "Normalize(mean=(0.5,), std=(0.2,))" in text


@pytest.mark.parametrize(
    "image",
    [IMAGE, IMAGE.convert("L"), IMAGE.convert("RGBA"), np.asarray(IMAGE), IMAGE.convert("F")],
    ids=["RGB", "L", "RGBA", "uint8 array", "F"],
)
def test_fused_to_tensor_normalize_is_bit_identical(image) -> None:
    channels = T.ToTensor()(image).shape[0]
    mean, std = [0.485, 0.456, 0.406, 0.5][:channels], [0.229, 0.224, 0.225, 0.25][:channels]
    fused = T.Compose([T.ToTensor(), T.Normalize(mean, std)])(image)
    apart = T.Normalize(mean, std)(T.ToTensor()(image))
    assert fused.dtype == apart.dtype
    np.testing.assert_array_equal(fused, apart)
