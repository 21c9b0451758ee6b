"""flowloader's transforms against torchvision's recorded outputs (golden/make_golden.py).

Exact for PIL inputs (the same Pillow calls), crops, flips, padding, ToTensor and Normalize.
Array ("tensor") resizing goes through Pillow rather than torch's kernels, and the colour
adjustments on arrays are re-implemented: those are held to the stated tolerances.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from PIL import Image

from flowloader.vision import transforms as T
from flowloader.vision.transforms import InterpolationMode
from flowloader.vision.transforms import functional as F

GOLDEN = np.load(os.path.join(os.path.dirname(__file__), "golden", "torchvision_golden.npz"))
RGB = Image.fromarray(GOLDEN["input_rgb"])
GRAY = Image.fromarray(GOLDEN["input_gray"], "L")
TENSOR = GOLDEN["input_tensor"]

# Stated tolerances (max absolute difference) where flowloader does not run torch's kernels.
RESIZE_FLOAT_TOLERANCE = 1e-5  # float arrays resized through Pillow's "F" mode (seen: 2e-6)
COLOR_FLOAT_TOLERANCE = 1e-5

MODES = {
    "bilinear": InterpolationMode.BILINEAR,
    "bicubic": InterpolationMode.BICUBIC,
    "nearest": InterpolationMode.NEAREST,
}

EXACT = {
    "to_tensor_rgb": lambda: T.ToTensor()(RGB),
    "to_tensor_gray": lambda: T.ToTensor()(GRAY),
    "pil_to_tensor_rgb": lambda: T.PILToTensor()(RGB),
    "normalize": lambda: T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))(
        T.ToTensor()(RGB)
    ),
    "hflip_rgb": lambda: F.hflip(RGB),
    "vflip_rgb": lambda: F.vflip(RGB),
    "hflip_tensor": lambda: F.hflip(TENSOR),
    "vflip_tensor": lambda: F.vflip(TENSOR),
    "center_crop_rgb": lambda: F.center_crop(RGB, [17, 20]),
    "center_crop_pad_rgb": lambda: F.center_crop(RGB, [35, 50]),
    "center_crop_tensor": lambda: F.center_crop(TENSOR, [17, 20]),
    "center_crop_pad_tensor": lambda: F.center_crop(TENSOR, [35, 50]),
    "crop_rgb": lambda: F.crop(RGB, 3, 5, 11, 13),
    "crop_outside_rgb": lambda: F.crop(RGB, -2, 30, 10, 20),
    "crop_tensor": lambda: F.crop(TENSOR, 3, 5, 11, 13),
    "crop_outside_tensor": lambda: F.crop(TENSOR, -2, 30, 10, 20),
    "grayscale_rgb": lambda: F.rgb_to_grayscale(RGB),
    "grayscale3_rgb": lambda: F.rgb_to_grayscale(RGB, 3),
    "brightness_rgb": lambda: F.adjust_brightness(RGB, 1.3),
    "contrast_rgb": lambda: F.adjust_contrast(RGB, 0.6),
    "saturation_rgb": lambda: F.adjust_saturation(RGB, 1.7),
    "hue_rgb": lambda: F.adjust_hue(RGB, 0.2),
    "hue_negative_rgb": lambda: F.adjust_hue(RGB, -0.2),
    "rrc_fallback_rgb": lambda: T.RandomResizedCrop(16, scale=(2.0, 3.0))(RGB),
    "pad_if_needed_gray": lambda: F.pad(F.pad(GRAY, [35 - 31, 0]), [0, 30 - 23]),
    "resize_max_size_rgb": lambda: F.resize(RGB, 20, max_size=25),
    "resized_crop_rgb": lambda: F.resized_crop(RGB, 2, 4, 20, 25, [16, 16]),
    **{
        f"pad_{mode}_rgb": (lambda mode=mode: F.pad(RGB, [2, 3, 4, 1], fill=7, padding_mode=mode))
        for mode in ("constant", "edge", "reflect", "symmetric")
    },
    **{
        f"pad_{mode}_tensor": (
            lambda mode=mode: F.pad(
                TENSOR, [2, 3, 4, 1], fill=0.5 if mode == "constant" else 0, padding_mode=mode
            )
        )
        for mode in ("constant", "edge", "reflect", "symmetric")
    },
    **{
        f"resize_{kind}_{name}_rgb": (lambda size=size, mode=mode: F.resize(RGB, size, mode))
        for name, mode in MODES.items()
        for kind, size in (("int", 17), ("pair", [40, 23]))
    },
    "resize_int_nearest_tensor": lambda: F.resize(TENSOR, 17, InterpolationMode.NEAREST),
    "resize_up_nearest_tensor": lambda: F.resize(TENSOR, [45, 60], InterpolationMode.NEAREST),
}

CLOSE = {
    **{
        f"resize_{kind}_{name}_tensor": (
            (lambda size=size, mode=mode: F.resize(TENSOR, size, mode)),
            RESIZE_FLOAT_TOLERANCE,
        )
        for name, mode in MODES.items()
        if name != "nearest"
        for kind, size in (("int", 17), ("up", [45, 60]))
    },
    "brightness_tensor": (lambda: F.adjust_brightness(TENSOR, 1.3), COLOR_FLOAT_TOLERANCE),
    "contrast_tensor": (lambda: F.adjust_contrast(TENSOR, 0.6), COLOR_FLOAT_TOLERANCE),
    "saturation_tensor": (lambda: F.adjust_saturation(TENSOR, 1.7), COLOR_FLOAT_TOLERANCE),
    "hue_tensor": (lambda: F.adjust_hue(TENSOR, 0.2), COLOR_FLOAT_TOLERANCE),
}


def test_every_recorded_case_is_checked() -> None:
    recorded = {key[len("out_") :] for key in GOLDEN.files if key.startswith("out_")}
    assert recorded == set(EXACT) | set(CLOSE)


@pytest.mark.parametrize("name", sorted(EXACT))
def test_exact(name) -> None:
    expected = GOLDEN[f"out_{name}"]
    ours = np.asarray(EXACT[name]())
    assert ours.dtype == expected.dtype, (ours.dtype, expected.dtype)
    assert ours.shape == expected.shape
    np.testing.assert_array_equal(ours, expected)


@pytest.mark.parametrize("name", sorted(CLOSE))
def test_within_tolerance(name) -> None:
    make, tolerance = CLOSE[name]
    expected = GOLDEN[f"out_{name}"]
    ours = np.asarray(make())
    assert ours.dtype == expected.dtype
    assert ours.shape == expected.shape
    assert np.max(np.abs(ours.astype(np.float64) - expected)) <= tolerance


def test_live_against_torchvision_when_available() -> None:
    """Where torchvision imports, regenerate a few cases live instead of from the file."""
    tv_functional = pytest.importorskip("torchvision.transforms.functional")
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(
        np.asarray(F.resize(RGB, 17)), np.asarray(tv_functional.resize(RGB, 17))
    )
    np.testing.assert_array_equal(
        F.center_crop(TENSOR, [35, 50]),
        tv_functional.center_crop(torch.from_numpy(TENSOR), [35, 50]).numpy(),
    )
