"""The ImageNet pipelines on large photographs (2048x1536 JPEGs, as phones and cameras
produce), flowloader against torch.utils.data + torchvision, 2 workers, batch 16, whole epochs
of 96 photos with start-up included (alike for both). flowloader decodes at reduced scale
when the crop allows it (DatasetFolder's reduced_decode, on by default; the numerical
difference is bounded in tests/unit/vision/test_native_kernel.py).

    python -m benchmarks.imagenet --large --batches 2 [--runs 3]    (--batches: epochs here)
"""

from __future__ import annotations

from . import imagenet


def section(quick: bool = False) -> str:
    return imagenet.section(quick, large=True)
