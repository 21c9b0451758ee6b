"""torchvision's augmentations beyond crops and flips: RandomErasing, RandomGrayscale,
RandomAffine, RandomRotation, and v2's ToDtype. The same names, arguments, checks and order
of draws as torchvision; the draws come from a NumPy generator (see :mod:`rng`), so a given
image's parameters are flowloader's own, not torch's.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import functional as F
from . import rng as _rng
from .functional import InterpolationMode
from .transforms import _RandomTransform, _Repr


def _check_sequence(value: Any, name: str, sizes: tuple[int, ...]) -> None:
    shown = sizes[0] if len(sizes) < 2 else " or ".join(str(s) for s in sizes)
    if not isinstance(value, Sequence):
        raise TypeError(f"{name} should be a sequence of length {shown}.")
    if len(value) not in sizes:
        raise ValueError(f"{name} should be a sequence of length {shown}.")


def _angles(value: Any, name: str, sizes: tuple[int, ...] = (2,)) -> list[float]:
    """torchvision's ``_setup_angle``: a number d is (-d, d)."""
    if isinstance(value, numbers.Number):
        if value < 0:  # type: ignore[operator]
            raise ValueError(f"If {name} is a single number, it must be positive.")
        value = [-value, value]  # type: ignore[operator]
    else:
        _check_sequence(value, name, sizes)
    return [float(d) for d in value]


def _fill(fill: Any) -> Any:
    if fill is None:
        return 0
    if not isinstance(fill, (Sequence, numbers.Number)):
        raise TypeError("Fill should be either a sequence or a number.")
    return fill


class RandomErasing(_RandomTransform):
    """Erase a random rectangle of a (..., C, H, W) array with probability ``p``: its area a
    fraction in ``scale`` of the image's, its aspect ratio in ``ratio`` (log-uniform), filled
    with ``value`` (a number, one per channel, or "random": standard normal noise). After ten
    draws that do not fit, the image is left as it is."""

    _fields = ("p", "scale", "ratio", "value", "inplace")

    def __init__(
        self,
        p: float = 0.5,
        scale: Sequence[float] = (0.02, 0.33),
        ratio: Sequence[float] = (0.3, 3.3),
        value: Any = 0,
        inplace: bool = False,
        *,
        rng: np.random.Generator | None = None,
    ) -> None:
        super().__init__(rng)
        if not isinstance(value, (numbers.Number, str, tuple, list)):
            raise TypeError("Argument value should be either a number or str or a sequence")
        if isinstance(value, str) and value != "random":
            raise ValueError("If value is str, it should be 'random'")
        if not isinstance(scale, Sequence):
            raise TypeError("Scale should be a sequence")
        if not isinstance(ratio, Sequence):
            raise TypeError("Ratio should be a sequence")
        if (scale[0] > scale[1]) or (ratio[0] > ratio[1]):
            warnings.warn("Scale and ratio should be of kind (min, max)", stacklevel=2)
        if scale[0] < 0 or scale[1] > 1:
            raise ValueError("Scale should be between 0 and 1")
        if p < 0 or p > 1:
            raise ValueError("Random erasing probability should be between 0 and 1")
        self.p, self.scale, self.ratio, self.value, self.inplace = p, scale, ratio, value, inplace

    def values(self, channels: int) -> list[float] | None:
        """The fill per channel (None: random), checked against the image's channels."""
        if isinstance(self.value, str):
            return None
        value: Any = self.value
        listed: list[Any] = [value] if isinstance(value, numbers.Number) else list(value)
        values = [float(v) for v in listed]
        if len(values) not in (1, channels):
            raise ValueError(
                "If value is a sequence, it should have either a single value or "
                f"{channels} (number of input channels)"
            )
        return values

    @staticmethod
    def get_params(
        img: np.ndarray,
        scale: Sequence[float],
        ratio: Sequence[float],
        value: list[float] | None = None,
        rng: Any = None,
    ) -> tuple[int, int, int, int, Any]:
        """(i, j, h, w, v): the box to erase and its values, or the whole image and the image
        itself when ten draws do not fit."""
        channels, height, width = img.shape[-3], img.shape[-2], img.shape[-1]
        area = height * width
        draw = _rng.resolve(None, rng)
        log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
        for _ in range(10):
            erase_area = area * draw.uniform(scale[0], scale[1])
            aspect = math.exp(draw.uniform(log_ratio[0], log_ratio[1]))
            h = round(math.sqrt(erase_area * aspect))
            w = round(math.sqrt(erase_area / aspect))
            if not (h < height and w < width):
                continue
            if value is None:
                v: Any = draw.standard_normal((channels, h, w), dtype=np.float32)
            else:
                v = np.asarray(value, dtype=np.float32)[:, None, None]
            i = int(draw.integers(0, height - h + 1))
            j = int(draw.integers(0, width - w + 1))
            return i, j, h, w, v
        return 0, 0, height, width, img

    def __call__(self, img: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        if not isinstance(img, np.ndarray):
            raise TypeError(f"img should be a NumPy array (tensor image). Got {type(img)}")
        draw = self.generator(rng)
        if draw.random() < self.p:
            values = self.values(img.shape[-3])
            i, j, h, w, v = self.get_params(img, self.scale, self.ratio, values, draw)
            return F.erase(img, i, j, h, w, v, self.inplace)
        return img


class RandomGrayscale(_RandomTransform):
    """Grayscale with probability ``p``, keeping the number of channels."""

    _fields = ("p",)

    def __init__(self, p: float = 0.1, *, rng: np.random.Generator | None = None) -> None:
        super().__init__(rng)
        self.p = p

    def __call__(self, img: Any, rng: np.random.Generator | None = None) -> Any:
        channels, _, _ = F.get_dimensions(img)
        if self.generator(rng).random() < self.p:
            return F.rgb_to_grayscale(img, num_output_channels=channels)
        return img


class RandomRotation(_RandomTransform):
    """Rotate by an angle drawn uniformly from ``degrees`` ((-d, d) for a number d)."""

    _fields = ("degrees", "interpolation", "expand", "center", "fill")

    def __init__(
        self,
        degrees: Any,
        interpolation: Any = InterpolationMode.NEAREST,
        expand: bool = False,
        center: Sequence[int] | None = None,
        fill: Any = 0,
        *,
        rng: np.random.Generator | None = None,
    ) -> None:
        super().__init__(rng)
        self.degrees = _angles(degrees, "degrees")
        if center is not None:
            _check_sequence(center, "center", (2,))
        self.center = center
        self.interpolation = F.interpolation_mode(interpolation)
        self.expand = expand
        self.fill = _fill(fill)

    @staticmethod
    def get_params(degrees: Sequence[float], rng: Any = None) -> float:
        """The angle, drawn uniformly from ``degrees``."""
        return float(_rng.resolve(None, rng).uniform(float(degrees[0]), float(degrees[1])))

    def __call__(self, img: Any, rng: np.random.Generator | None = None) -> Any:
        angle = self.get_params(self.degrees, self.generator(rng))
        return F.rotate(img, angle, self.interpolation, self.expand, self.center, self.fill)


class RandomAffine(_RandomTransform):
    """A random affine transform keeping the size: an angle from ``degrees``, a translation
    up to ``translate`` (fractions of width and height), a scale from ``scale``, shears from
    ``shear`` (x, or x then y), drawn in that order."""

    _fields = ("degrees", "translate", "scale", "shear", "interpolation", "fill", "center")

    def __init__(
        self,
        degrees: Any,
        translate: Sequence[float] | None = None,
        scale: Sequence[float] | None = None,
        shear: Any = None,
        interpolation: Any = InterpolationMode.NEAREST,
        fill: Any = 0,
        center: Sequence[int] | None = None,
        *,
        rng: np.random.Generator | None = None,
    ) -> None:
        super().__init__(rng)
        self.degrees = _angles(degrees, "degrees")
        if translate is not None:
            _check_sequence(translate, "translate", (2,))
            if not all(0.0 <= t <= 1.0 for t in translate):
                raise ValueError("translation values should be between 0 and 1")
        self.translate = translate
        if scale is not None:
            _check_sequence(scale, "scale", (2,))
            if any(s <= 0 for s in scale):
                raise ValueError("scale values should be positive")
        self.scale = scale
        self.shear = None if shear is None else _angles(shear, "shear", (2, 4))
        self.interpolation = F.interpolation_mode(interpolation)
        self.fill = _fill(fill)
        if center is not None:
            _check_sequence(center, "center", (2,))
        self.center = center

    @staticmethod
    def get_params(
        degrees: Sequence[float],
        translate: Sequence[float] | None,
        scale_ranges: Sequence[float] | None,
        shears: Sequence[float] | None,
        img_size: Sequence[int],
        rng: Any = None,
    ) -> tuple[float, tuple[int, int], float, tuple[float, float]]:
        """(angle, (tx, ty), scale, (shear_x, shear_y)) for an image of ``img_size`` (width,
        height), drawn in torchvision's order."""
        draw = _rng.resolve(None, rng)
        angle = float(draw.uniform(float(degrees[0]), float(degrees[1])))
        translations = (0, 0)
        if translate is not None:
            max_dx, max_dy = float(translate[0] * img_size[0]), float(translate[1] * img_size[1])
            tx = round(draw.uniform(-max_dx, max_dx))
            ty = round(draw.uniform(-max_dy, max_dy))
            translations = (tx, ty)
        scale = 1.0 if scale_ranges is None else float(draw.uniform(*scale_ranges))
        shear_x = shear_y = 0.0
        if shears is not None:
            shear_x = float(draw.uniform(shears[0], shears[1]))
            if len(shears) == 4:
                shear_y = float(draw.uniform(shears[2], shears[3]))
        return angle, translations, scale, (shear_x, shear_y)

    def __call__(self, img: Any, rng: np.random.Generator | None = None) -> Any:
        _, height, width = F.get_dimensions(img)
        angle, translations, scale, shear = self.get_params(
            self.degrees,
            self.translate,
            self.scale,
            self.shear,
            [width, height],
            self.generator(rng),
        )
        return F.affine(
            img, angle, list(translations), scale, list(shear), self.interpolation, self.fill,
            self.center,
        )  # fmt: skip


class ToDtype(_Repr):
    """torchvision v2's ToDtype on array images: convert to ``dtype``; with ``scale``, map an
    integer range to [0, 1] and back (PIL images pass through, as in v2)."""

    _fields = ("dtype", "scale")

    def __init__(self, dtype: Any, scale: bool = False) -> None:
        self.dtype = _numpy_dtype(dtype)
        self.scale = scale

    def __call__(self, img: Any) -> Any:
        return F.to_dtype(img, self.dtype, self.scale)


def _numpy_dtype(dtype: Any) -> np.dtype:
    """A NumPy dtype from itself, its name, or a torch dtype (``torch.float32``)."""
    name = str(dtype)
    if name.startswith("torch."):
        name = name[len("torch.") :]
    try:
        return np.dtype(dtype if not str(dtype).startswith("torch.") else name)
    except TypeError as error:
        raise TypeError(f"dtype should be a NumPy or torch dtype, got {dtype!r}") from error
