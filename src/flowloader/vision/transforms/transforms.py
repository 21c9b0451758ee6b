"""torchvision's transform classes: thin wrappers over :mod:`functional`.

Random transforms (and ``Compose``) take the generator to draw from as an argument,
``transform(img, rng=...)``; :mod:`rng` says what they draw from when it is left out. How a
pipeline runs over a whole batch is :mod:`flowloader.vision.plan`'s business.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import functional as F
from . import rng as _rng
from .functional import InterpolationMode


def call_step(step: Callable[..., Any], img: Any, rng: Any) -> Any:
    """``step(img)``, handing ``rng`` to the steps that draw (``takes_rng``)."""
    return step(img, rng) if getattr(step, "takes_rng", False) else step(img)


class _Repr:
    _fields: tuple[str, ...] = ()

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({args})"


class ToTensor(_Repr):
    """PIL image or HWC array -> CHW float32; 8-bit data scaled to [0, 1]."""

    def __call__(self, pic: Any) -> np.ndarray:
        return F.to_tensor(pic)


class PILToTensor(_Repr):
    """PIL image or HWC array -> CHW array of the same dtype (uint8 for 8-bit images), unscaled;
    for pipelines that normalise later, e.g. on the accelerator."""

    def __call__(self, pic: Any) -> np.ndarray:
        return F.pil_to_tensor(pic)


class Normalize(_Repr):
    """(x - mean) / std per channel, on float CHW arrays."""

    _fields = ("mean", "std")

    def __init__(self, mean: Sequence[float], std: Sequence[float], inplace: bool = False) -> None:
        self.mean, self.std, self.inplace = mean, std, inplace

    def __call__(self, tensor: np.ndarray) -> np.ndarray:
        return F.normalize(tensor, self.mean, self.std, self.inplace)


class Resize(_Repr):
    """Resize: an int matches the shorter edge (aspect ratio kept, ``max_size`` caps the longer
    one); an (h, w) pair sets both."""

    _fields = ("size", "interpolation", "max_size", "antialias")

    def __init__(
        self,
        size: int | Sequence[int],
        interpolation: Any = InterpolationMode.BILINEAR,
        max_size: int | None = None,
        antialias: bool | None = True,
    ) -> None:
        if not isinstance(size, (int, Sequence)):
            raise TypeError(f"Size should be int or sequence. Got {type(size)}")
        if isinstance(size, Sequence) and len(size) not in (1, 2):
            raise ValueError("If size is a sequence, it should have 1 or 2 values")
        self.size = size
        self.interpolation = F.interpolation_mode(interpolation)
        self.max_size = max_size
        self.antialias = antialias

    def __call__(self, img: Any) -> Any:
        return F.resize(img, self.size, self.interpolation, self.max_size, self.antialias)


class CenterCrop(_Repr):
    """The central crop of ``size``; smaller images are padded with zeros first."""

    _fields = ("size",)

    def __init__(self, size: int | Sequence[int]) -> None:
        self.size = F.size_pair(size)

    def __call__(self, img: Any) -> Any:
        return F.center_crop(img, self.size)


class Pad(_Repr):
    """Pad the image's borders by ``padding`` pixels with ``fill``, or by ``padding_mode``
    ("constant", "edge", "reflect", "symmetric"), as torchvision's ``Pad``."""

    _fields = ("padding", "fill", "padding_mode")

    def __init__(self, padding: Any, fill: Any = 0, padding_mode: str = "constant") -> None:
        self.padding, self.fill, self.padding_mode = padding, fill, padding_mode

    def __call__(self, img: Any) -> Any:
        return F.pad(img, self.padding, self.fill, self.padding_mode)


class Lambda(_Repr):
    """Apply a user function."""

    def __init__(self, lambd: Callable[[Any], Any]) -> None:
        if not callable(lambd):
            raise TypeError(f"Argument lambd should be callable, got {type(lambd).__name__!r}")
        self.lambd = lambd

    def __call__(self, img: Any) -> Any:
        return self.lambd(img)


class Grayscale(_Repr):
    """Convert the image to grey with ``num_output_channels`` (1 or 3) channels, as
    torchvision's ``Grayscale``."""

    _fields = ("num_output_channels",)

    def __init__(self, num_output_channels: int = 1) -> None:
        self.num_output_channels = num_output_channels

    def __call__(self, img: Any) -> Any:
        return F.rgb_to_grayscale(img, self.num_output_channels)


class _RandomTransform(_Repr):
    """A transform that draws at random; see :mod:`rng` for where from."""

    takes_rng = True

    def __init__(self, rng: np.random.Generator | None = None) -> None:
        self.rng = rng

    def generator(self, given: Any = None) -> Any:
        return _rng.resolve(self.rng, given)


class _RandomFlip(_RandomTransform):
    _fields = ("p",)
    _flip: Callable[[Any], Any]

    def __init__(self, p: float = 0.5, *, rng: np.random.Generator | None = None) -> None:
        super().__init__(rng)
        self.p = p

    def __call__(self, img: Any, rng: np.random.Generator | None = None) -> Any:
        return self._flip(img) if self.generator(rng).random() < self.p else img


class RandomHorizontalFlip(_RandomFlip):
    """Mirror left-right with probability ``p``."""

    _flip = staticmethod(F.hflip)


class RandomVerticalFlip(_RandomFlip):
    """Mirror top-bottom with probability ``p``."""

    _flip = staticmethod(F.vflip)


class RandomCrop(_RandomTransform):
    """A random crop of ``size``, after optional padding (``pad_if_needed`` pads images
    smaller than the crop)."""

    _fields = ("size", "padding")

    def __init__(
        self,
        size: int | Sequence[int],
        padding: Any = None,
        pad_if_needed: bool = False,
        fill: Any = 0,
        padding_mode: str = "constant",
        *,
        rng: np.random.Generator | None = None,
    ) -> None:
        super().__init__(rng)
        self.size = F.size_pair(size)
        self.padding = padding
        self.pad_if_needed = pad_if_needed
        self.fill = fill
        self.padding_mode = padding_mode

    @staticmethod
    def get_params(
        img: Any, output_size: tuple[int, int], rng: np.random.Generator | None = None
    ) -> tuple[int, int, int, int]:
        """(top, left, height, width) of a random crop of ``output_size``."""
        _, height, width = F.get_dimensions(img)
        th, tw = output_size
        if height < th or width < tw:
            raise ValueError(
                f"Required crop size {(th, tw)} is larger than input image size {(height, width)}"
            )
        if (width, height) == (tw, th):
            return 0, 0, height, width
        draw = _rng.resolve(None, rng)
        top = draw.integers(0, height - th + 1)
        left = draw.integers(0, width - tw + 1)
        return int(top), int(left), th, tw

    def __call__(self, img: Any, rng: np.random.Generator | None = None) -> Any:
        if self.padding is not None:
            img = F.pad(img, self.padding, self.fill, self.padding_mode)
        _, height, width = F.get_dimensions(img)
        if self.pad_if_needed and width < self.size[1]:
            img = F.pad(img, [self.size[1] - width, 0], self.fill, self.padding_mode)
        if self.pad_if_needed and height < self.size[0]:
            img = F.pad(img, [0, self.size[0] - height], self.fill, self.padding_mode)
        top, left, h, w = self.get_params(img, self.size, self.generator(rng))
        return F.crop(img, top, left, h, w)


class RandomResizedCrop(_RandomTransform):
    """A crop of random area (``scale``) and aspect ratio (``ratio``), resized to ``size``;
    after ten failed draws, the central crop that fits ``ratio`` (torchvision's fallback)."""

    _fields = ("size", "scale", "ratio", "interpolation")

    def __init__(
        self,
        size: int | Sequence[int],
        scale: tuple[float, float] = (0.08, 1.0),
        ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0),
        interpolation: Any = InterpolationMode.BILINEAR,
        antialias: bool | None = True,
        *,
        rng: np.random.Generator | None = None,
    ) -> None:
        super().__init__(rng)
        self.size = F.size_pair(size)
        if not isinstance(scale, Sequence):
            raise TypeError("Scale should be a sequence")
        if not isinstance(ratio, Sequence):
            raise TypeError("Ratio should be a sequence")
        if scale[0] > scale[1] or ratio[0] > ratio[1]:
            warnings.warn("Scale and ratio should be of kind (min, max)", stacklevel=2)
        self.scale, self.ratio = scale, ratio
        self.interpolation = F.interpolation_mode(interpolation)
        self.antialias = antialias

    @staticmethod
    def get_params(
        img: Any,
        scale: Sequence[float],
        ratio: Sequence[float],
        rng: np.random.Generator | None = None,
    ) -> tuple[int, int, int, int]:
        """(top, left, height, width) of the crop, drawn as torchvision draws it."""
        _, height, width = F.get_dimensions(img)
        return crop_box(height, width, scale, ratio, _rng.resolve(None, rng))

    def __call__(self, img: Any, rng: np.random.Generator | None = None) -> Any:
        top, left, h, w = self.get_params(img, self.scale, self.ratio, self.generator(rng))
        return F.resized_crop(img, top, left, h, w, self.size, self.interpolation, self.antialias)


def crop_box(
    height: int, width: int, scale: Sequence[float], ratio: Sequence[float], draw: Any
) -> tuple[int, int, int, int]:
    """RandomResizedCrop's parameter sampling for an image of (height, width)."""
    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = area * draw.uniform(scale[0], scale[1])
        aspect = math.exp(draw.uniform(log_ratio[0], log_ratio[1]))
        w = round(math.sqrt(target_area * aspect))
        h = round(math.sqrt(target_area / aspect))
        if 0 < w <= width and 0 < h <= height:
            top = draw.integers(0, height - h + 1)
            left = draw.integers(0, width - w + 1)
            return int(top), int(left), h, w
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, round(width / min(ratio))
    elif in_ratio > max(ratio):
        h, w = height, round(height * max(ratio))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


class ColorJitter(_RandomTransform):
    """Random brightness, contrast, saturation and hue changes, applied in a random order."""

    _fields = ("brightness", "contrast", "saturation", "hue")

    def __init__(
        self,
        brightness: Any = 0,
        contrast: Any = 0,
        saturation: Any = 0,
        hue: Any = 0,
        *,
        rng: np.random.Generator | None = None,
    ) -> None:
        super().__init__(rng)
        self.brightness = self._check_input(brightness, "brightness")
        self.contrast = self._check_input(contrast, "contrast")
        self.saturation = self._check_input(saturation, "saturation")
        self.hue = self._check_input(
            hue, "hue", center=0, bound=(-0.5, 0.5), clip_first_on_zero=False
        )

    @staticmethod
    def _check_input(
        value: Any,
        name: str,
        center: float = 1,
        bound: tuple[float, float] = (0, float("inf")),
        clip_first_on_zero: bool = True,
    ) -> list[float] | None:
        if isinstance(value, numbers.Real):
            if value < 0:
                raise ValueError(f"If {name} is a single number, it must be non negative.")
            value = [center - float(value), center + float(value)]
            if clip_first_on_zero:
                value[0] = max(value[0], 0.0)
        elif isinstance(value, (tuple, list)) and len(value) == 2:
            value = [float(value[0]), float(value[1])]
        else:
            raise TypeError(f"{name} should be a single number or a list/tuple with length 2.")
        if not bound[0] <= value[0] <= value[1] <= bound[1]:
            raise ValueError(f"{name} values should be between {bound}, but got {value}.")
        if value[0] == value[1] == center:
            return None
        return value

    def get_params(self, rng: Any = None) -> tuple[np.ndarray, Any, Any, Any, Any]:
        draw = self.generator(rng)
        order = draw.permutation(4)
        factors = [
            None if r is None else draw.uniform(r[0], r[1])
            for r in (self.brightness, self.contrast, self.saturation, self.hue)
        ]
        return (order, *factors)

    def __call__(self, img: Any, rng: np.random.Generator | None = None) -> Any:
        order, brightness, contrast, saturation, hue = self.get_params(rng)
        adjust = {
            0: (F.adjust_brightness, brightness),
            1: (F.adjust_contrast, contrast),
            2: (F.adjust_saturation, saturation),
            3: (F.adjust_hue, hue),
        }
        for step in order:
            fn, factor = adjust[int(step)]
            if factor is not None:
                img = fn(img, factor)
        return img
