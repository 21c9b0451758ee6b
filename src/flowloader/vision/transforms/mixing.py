"""MixUp and CutMix: batch transforms that mix each image (and its label) with the one
before it in the batch, as torchvision v2's do. They have no per-sample form: they run on a
collated batch, e.g. ``collate_fn=lambda batch: mixup(*default_collate(batch))``, or as
``collate_fn=MixUp(...).collate`` (:meth:`MixUp.collate`).

The draws (one Beta(alpha, alpha) number a batch, and CutMix's box centre) come from the
transform's own ``rng=``, else the generator handed to the call, else, inside a DataLoader's
``collate_fn``, the batch's own generator (:func:`flowloader.batching.batch_rng`: Philox
keyed by (epoch seed, the batch's number in the epoch), the same for any ``num_workers``,
worker method, ``in_order`` and after a resume), else NumPy's global RNG.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from flowloader import batching

from . import rng as _rng

__all__ = ["CutMix", "MixUp"]


class _MixBase:
    """What MixUp and CutMix share: arguments, the labels, the checks."""

    takes_rng = True

    def __init__(
        self,
        *,
        alpha: float = 1.0,
        num_classes: int | None = None,
        labels_getter: Any = "default",
        rng: np.random.Generator | None = None,
    ) -> None:
        self.alpha = float(alpha)
        if self.alpha <= 0:
            raise ValueError(f"alpha should be positive, got {alpha}")
        self.num_classes = num_classes
        if labels_getter != "default" and not callable(labels_getter):
            raise ValueError(
                f"labels_getter should either be 'default' or a callable, got {labels_getter!r}"
            )
        self.labels_getter = labels_getter
        self.rng = rng

    def __repr__(self) -> str:
        return f"{type(self).__name__}(alpha={self.alpha}, num_classes={self.num_classes})"

    def _labels(self, inputs: tuple[Any, ...]) -> np.ndarray:
        if self.labels_getter == "default":
            if len(inputs) < 2:
                raise ValueError("Could not infer where the labels are: pass (images, labels)")
            labels = inputs[1]
        else:
            labels = self.labels_getter(inputs)
        if not isinstance(labels, np.ndarray):
            raise ValueError(f"The labels must be a NumPy array, but got {type(labels)} instead.")
        if labels.ndim not in (1, 2):
            raise ValueError(
                "labels should be index based with shape (batch_size,) or probability based "
                f"with shape (batch_size, num_classes), but got an array of shape "
                f"{labels.shape} instead."
            )
        if (
            labels.ndim == 2
            and self.num_classes is not None
            and labels.shape[-1] != self.num_classes
        ):
            raise ValueError(
                "When passing 2D labels, the number of elements in last dimension must match "
                f"num_classes: {labels.shape[-1]} != {self.num_classes}. You can Leave "
                "num_classes to None."
            )
        if labels.ndim == 1 and self.num_classes is None:
            raise ValueError("num_classes must be passed if the labels are index-based (1D)")
        return labels

    def _mixed_labels(self, labels: np.ndarray, lam: float) -> np.ndarray:
        if labels.ndim == 1:
            assert self.num_classes is not None
            labels = np.eye(self.num_classes, dtype=np.float32)[labels]
        if not np.issubdtype(labels.dtype, np.floating):
            labels = labels.astype(np.float32)
        dtype = labels.dtype.type
        return np.roll(labels, 1, 0) * dtype(1.0 - lam) + labels * dtype(lam)

    @staticmethod
    def _check_images(images: np.ndarray, batch_size: int) -> None:
        if images.ndim != 4:
            raise ValueError(
                f"Expected a batched input with 4 dims, but got {images.ndim} dimensions instead."
            )
        if images.shape[0] != batch_size:
            raise ValueError(
                "The batch size of the image or video does not match the batch size of the "
                f"labels: {images.shape[0]} != {batch_size}."
            )

    def __call__(self, *inputs: Any, rng: np.random.Generator | None = None) -> Any:
        """``(images, labels)`` mixed: every 4-D array but the labels is a batch of images,
        the labels become (batch_size, num_classes) probabilities; inside a DataLoader's
        ``collate_fn`` the draws come from the batch's own generator (``batch_rng()``)."""
        labels = self._labels(inputs)
        draw = _rng.resolve(self.rng, batching.batch_rng() if rng is None else rng)
        images = [
            x for x in inputs if isinstance(x, np.ndarray) and x is not labels and x.ndim >= 3
        ]
        for batch in images:
            self._check_images(batch, len(labels))
        params = self._params(draw, images[0].shape[-2:] if images else (0, 0))
        out = tuple(
            self._mixed_labels(x, self._label_lambda(params)) if x is labels
            else self._mix(x, params) if any(x is image for image in images)
            else x
            for x in inputs
        )  # fmt: skip
        return out if len(out) > 1 else out[0]

    def collate(self, batch: Any, collate_fn: Callable[[Any], Any] | None = None) -> Any:
        """A collate function: ``collate_fn`` (default_collate) then this transform, drawing
        as :meth:`__call__` does: in a DataLoader, from the batch's own generator."""
        from flowloader.collate import default_collate

        return self(*(collate_fn or default_collate)(batch))

    def _params(self, draw: Any, size: tuple[int, int]) -> dict[str, Any]:
        raise NotImplementedError

    def _label_lambda(self, params: dict[str, Any]) -> float:
        raise NotImplementedError

    def _mix(self, images: np.ndarray, params: dict[str, Any]) -> np.ndarray:
        raise NotImplementedError


class MixUp(_MixBase):
    """MixUp (Zhang et al.): each image and label mixed with the previous one in the batch,
    ``lam * x + (1 - lam) * previous``, ``lam`` ~ Beta(alpha, alpha) once a batch. Images
    must be float; labels become one-hot (``num_classes``) probabilities."""

    def _params(self, draw: Any, size: tuple[int, int]) -> dict[str, Any]:
        return {"lam": float(draw.beta(self.alpha, self.alpha))}

    def _label_lambda(self, params: dict[str, Any]) -> float:
        return params["lam"]

    def _mix(self, images: np.ndarray, params: dict[str, Any]) -> np.ndarray:
        if not np.issubdtype(images.dtype, np.floating):
            raise TypeError(f"MixUp mixes float images, got {images.dtype}")
        lam, dtype = params["lam"], images.dtype.type
        return np.roll(images, 1, 0) * dtype(1.0 - lam) + images * dtype(lam)


class CutMix(_MixBase):
    """CutMix (Yun et al.): a box of each image replaced by the previous image's, its area
    ``1 - lam`` of the image (``lam`` ~ Beta(alpha, alpha)), clipped to the image; the labels
    mixed by the area actually kept."""

    def _params(self, draw: Any, size: tuple[int, int]) -> dict[str, Any]:
        lam = float(draw.beta(self.alpha, self.alpha))
        height, width = size
        r_x = int(draw.integers(0, width))
        r_y = int(draw.integers(0, height))
        r = 0.5 * math.sqrt(1.0 - lam)
        r_w_half, r_h_half = int(r * width), int(r * height)
        x1, y1 = max(r_x - r_w_half, 0), max(r_y - r_h_half, 0)
        x2, y2 = min(r_x + r_w_half, width), min(r_y + r_h_half, height)
        lam_adjusted = float(1.0 - (x2 - x1) * (y2 - y1) / (width * height))
        return {"box": (x1, y1, x2, y2), "lam_adjusted": lam_adjusted}

    def _label_lambda(self, params: dict[str, Any]) -> float:
        return params["lam_adjusted"]

    def _mix(self, images: np.ndarray, params: dict[str, Any]) -> np.ndarray:
        x1, y1, x2, y2 = params["box"]
        out = images.copy()
        out[..., y1:y2, x1:x2] = np.roll(images, 1, 0)[..., y1:y2, x1:x2]
        return out
