"""Record torchvision's outputs on small fixed inputs, for tests/unit/vision/test_golden.py.

Run it in an environment with torchvision (not needed by the tests themselves):

    python -m venv /tmp/tv && /tmp/tv/bin/pip install torch==2.14.1 torchvision==0.29.1 pillow numpy
    /tmp/tv/bin/python tests/unit/vision/golden/make_golden.py

Each case is a name, a PIL or tensor input, and torchvision's output as a NumPy array. Only
deterministic operations are recorded (random transforms are compared through their
deterministic parts: crops with given boxes, flips, the RandomResizedCrop fallback).
"""

from __future__ import annotations

import os

import numpy as np
import torch
import torchvision
from PIL import Image
from torchvision.transforms import InterpolationMode
from torchvision.transforms import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


def inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1234)
    smooth = np.asarray(
        Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)).resize(
            (41, 29), Image.BICUBIC
        )
    )
    return {
        "rgb": np.clip(
            smooth.astype(np.int16) + rng.integers(-20, 20, smooth.shape), 0, 255
        ).astype(np.uint8),
        "gray": rng.integers(0, 256, (23, 31), dtype=np.uint8),
        "tensor": rng.random((3, 29, 41), dtype=np.float32),
    }


def to_array(out) -> np.ndarray:
    if isinstance(out, torch.Tensor):
        return out.numpy()
    return np.asarray(out)


def cases(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    rgb, gray = Image.fromarray(data["rgb"]), Image.fromarray(data["gray"], "L")
    tensor = torch.from_numpy(data["tensor"])
    t = torchvision.transforms
    out = {
        "to_tensor_rgb": t.ToTensor()(rgb),
        "to_tensor_gray": t.ToTensor()(gray),
        "pil_to_tensor_rgb": t.PILToTensor()(rgb),
        "normalize": t.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))(t.ToTensor()(rgb)),
        "hflip_rgb": F.hflip(rgb),
        "vflip_rgb": F.vflip(rgb),
        "hflip_tensor": F.hflip(tensor),
        "vflip_tensor": F.vflip(tensor),
        "center_crop_rgb": F.center_crop(rgb, [17, 20]),
        "center_crop_pad_rgb": F.center_crop(rgb, [35, 50]),
        "center_crop_tensor": F.center_crop(tensor, [17, 20]),
        "center_crop_pad_tensor": F.center_crop(tensor, [35, 50]),
        "crop_rgb": F.crop(rgb, 3, 5, 11, 13),
        "crop_outside_rgb": F.crop(rgb, -2, 30, 10, 20),
        "crop_tensor": F.crop(tensor, 3, 5, 11, 13),
        "crop_outside_tensor": F.crop(tensor, -2, 30, 10, 20),
        "grayscale_rgb": F.rgb_to_grayscale(rgb),
        "grayscale3_rgb": F.rgb_to_grayscale(rgb, 3),
        "brightness_rgb": F.adjust_brightness(rgb, 1.3),
        "contrast_rgb": F.adjust_contrast(rgb, 0.6),
        "saturation_rgb": F.adjust_saturation(rgb, 1.7),
        "hue_rgb": F.adjust_hue(rgb, 0.2),
        "hue_negative_rgb": F.adjust_hue(rgb, -0.2),
        "brightness_tensor": F.adjust_brightness(tensor, 1.3),
        "contrast_tensor": F.adjust_contrast(tensor, 0.6),
        "saturation_tensor": F.adjust_saturation(tensor, 1.7),
        "hue_tensor": F.adjust_hue(tensor, 0.2),
        "rrc_fallback_rgb": t.RandomResizedCrop(16, scale=(2.0, 3.0))(rgb),
        # RandomCrop(pad_if_needed=True) pads by the deficit on both sides, like this:
        "pad_if_needed_gray": F.pad(F.pad(gray, [35 - 31, 0]), [0, 30 - 23]),
    }
    for mode in ("constant", "edge", "reflect", "symmetric"):
        out[f"pad_{mode}_rgb"] = F.pad(rgb, [2, 3, 4, 1], fill=7, padding_mode=mode)
        out[f"pad_{mode}_tensor"] = F.pad(
            tensor, [2, 3, 4, 1], fill=0.5 if mode == "constant" else 0, padding_mode=mode
        )
    for name, mode in (
        ("bilinear", InterpolationMode.BILINEAR),
        ("bicubic", InterpolationMode.BICUBIC),
        ("nearest", InterpolationMode.NEAREST),
    ):
        out[f"resize_int_{name}_rgb"] = F.resize(rgb, 17, mode)
        out[f"resize_pair_{name}_rgb"] = F.resize(rgb, [40, 23], mode)
        out[f"resize_int_{name}_tensor"] = F.resize(tensor, 17, mode, antialias=True)
        out[f"resize_up_{name}_tensor"] = F.resize(tensor, [45, 60], mode, antialias=True)
    out["resize_max_size_rgb"] = F.resize(rgb, 20, max_size=25)
    out["resized_crop_rgb"] = F.resized_crop(rgb, 2, 4, 20, 25, [16, 16])
    return {name: to_array(value) for name, value in out.items()}


def main() -> None:
    data = inputs()
    results = cases(data)
    path = os.path.join(HERE, "torchvision_golden.npz")
    np.savez_compressed(
        path,
        **{f"input_{k}": v for k, v in data.items()},
        **{f"out_{k}": v for k, v in results.items()},
    )
    print(f"wrote {len(results)} cases to {path} (torchvision {torchvision.__version__})")


if __name__ == "__main__":
    main()
