"""Record torchvision's outputs for the augmentations of tests/unit/vision/test_augment.py
(RandomAffine, RandomRotation, RandomErasing, RandomGrayscale, ToDtype, MixUp, CutMix).

Run it in an environment with torchvision (not needed by the tests themselves):

    python -m venv /tmp/tv && /tmp/tv/bin/pip install torch==2.14.1 torchvision==0.29.1 pillow numpy
    /tmp/tv/bin/python tests/unit/vision/golden/make_augment_golden.py

Random transforms are recorded through their deterministic parts, with given parameters:
the functional affine and rotation, erase with a given box, the mixing of a batch with a
given lambda and box. Inputs are small and fixed (generated here, stored with the outputs).
"""

from __future__ import annotations

import os

import numpy as np
import torch
import torchvision
from PIL import Image
from torchvision.transforms import InterpolationMode, v2
from torchvision.transforms import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
NEAREST, BILINEAR = InterpolationMode.NEAREST, InterpolationMode.BILINEAR


def inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4321)
    smooth = np.asarray(
        Image.fromarray(rng.integers(0, 256, (5, 6, 3), dtype=np.uint8)).resize(
            (19, 15), Image.BICUBIC
        )
    )
    return {
        "rgb": smooth,
        "gray": rng.integers(0, 256, (15, 17), dtype=np.uint8),
        "tensor": rng.random((3, 15, 19), dtype=np.float32),
        "batch": rng.random((4, 3, 6, 7), dtype=np.float32),
        "labels": np.array([2, 0, 4, 1], dtype=np.int64),
    }


# (name, angle, translate, scale, shear, center)
AFFINES = [
    ("rotate", 30.0, [0, 0], 1.0, [0.0, 0.0], None),
    ("all", -17.5, [2, -1], 1.2, [8.0, -4.0], None),
    ("center", 45.0, [1, 1], 0.8, [0.0, 10.0], [3, 4]),
]


def cases(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    rgb, gray = Image.fromarray(data["rgb"]), Image.fromarray(data["gray"], "L")
    tensor = torch.from_numpy(data["tensor"])
    out = {}
    for name, angle, translate, scale, shear, center in AFFINES:
        for mode_name, mode in (("nearest", NEAREST), ("bilinear", BILINEAR)):
            for image_name, image, fill in (
                ("rgb", rgb, [10, 200, 30]),
                ("gray", gray, 0),
                ("tensor", tensor, [0.25, 0.5, 0.75]),
            ):
                key = f"affine_{name}_{mode_name}_{image_name}"
                out[key] = F.affine(image, angle, translate, scale, shear, mode, fill, center)
    for expand in (False, True):
        for mode_name, mode in (("nearest", NEAREST), ("bilinear", BILINEAR)):
            suffix = f"{'expand' if expand else 'same'}_{mode_name}"
            out[f"rotate_{suffix}_rgb"] = F.rotate(rgb, 33.0, mode, expand, None, [5, 6, 7])
            out[f"rotate_{suffix}_tensor"] = F.rotate(tensor, 33.0, mode, expand, None, [0.5])
    out["rotate_center_rgb"] = F.rotate(rgb, -60.0, NEAREST, False, [2, 3], None)
    out["erase_tensor"] = F.erase(tensor, 2, 3, 5, 7, torch.tensor([0.1, 0.2, 0.3])[:, None, None])
    out["grayscale_p1_rgb"] = torchvision.transforms.RandomGrayscale(p=1.0)(rgb)
    uint8 = torch.from_numpy(np.ascontiguousarray(data["rgb"].transpose(2, 0, 1)))
    out["to_dtype_scaled"] = v2.ToDtype(torch.float32, scale=True)(uint8)
    out["to_dtype_unscaled"] = v2.ToDtype(torch.float32)(uint8)
    out["to_dtype_back"] = v2.ToDtype(torch.uint8, scale=True)(tensor)
    batch, labels = torch.from_numpy(data["batch"]), torch.from_numpy(data["labels"])
    mixup, cutmix = v2.MixUp(num_classes=5), v2.CutMix(num_classes=5)
    params = {"labels": labels, "batch_size": 4, "lam": 0.3}
    out["mixup_images"] = mixup.transform(batch, params)
    out["mixup_labels"] = mixup.transform(labels, params)
    params = {"labels": labels, "batch_size": 4, "box": (1, 2, 5, 6), "lam_adjusted": 0.4}
    out["cutmix_images"] = cutmix.transform(batch, params)
    out["cutmix_labels"] = cutmix.transform(labels, params)
    return {k: v.numpy() if isinstance(v, torch.Tensor) else np.asarray(v) for k, v in out.items()}


def main() -> None:
    data = inputs()
    results = cases(data)
    path = os.path.join(HERE, "augment_golden.npz")
    np.savez_compressed(
        path,
        **{f"input_{k}": v for k, v in data.items()},
        **{f"out_{k}": v for k, v in results.items()},
    )
    print(f"wrote {len(results)} cases to {path} (torchvision {torchvision.__version__})")


if __name__ == "__main__":
    main()
