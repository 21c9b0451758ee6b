"""Decoding image files (a path, or the bytes of one) to RGB PIL images, at full scale or at
a reduced scale libjpeg computes for less (DCT scaling, Pillow's ``draft``)."""

from __future__ import annotations

import io
import math

from PIL import Image

REDUCTIONS = (8, 4, 2)


def decoded_rgb(image: Image.Image) -> Image.Image:
    """``image`` decoded as RGB: the same pixels as ``convert("RGB")``, without its copy when
    the image already is RGB (most JPEGs)."""
    if image.mode == "RGB":
        image.load()
        return image
    return image.convert("RGB")


def read(source: str | bytes) -> bytes:
    """The bytes of an image file (a path, or the bytes themselves)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return source
    with open(source, "rb") as stream:  # read whole: the decode must not outlive the file
        return stream.read()


def open_lazily(source: str | bytes) -> Image.Image:
    """The image at ``source`` (a path, or a file's bytes) with only its header parsed: the
    size and format are known, nothing is decoded yet."""
    return Image.open(io.BytesIO(read(source)))


def open_rgb(source: str | bytes) -> Image.Image:
    """The image at ``source`` decoded as RGB (torchvision's ``pil_loader``)."""
    return decoded_rgb(open_lazily(source))


def reduction_for(factor: float) -> int:
    """The largest DCT reduction (8, 4, 2 or none) that still leaves at least the output
    resolution, when the kept region is ``factor`` times larger than the output."""
    return next((r for r in REDUCTIONS if r <= factor), 1)


def decode_reduced(image: Image.Image, reduction: int) -> Image.Image:
    """A lazily opened JPEG decoded as RGB at 1/``reduction`` of its size (rounded up)."""
    if reduction > 1:
        width, height = image.size
        image.draft("RGB", (math.ceil(width / reduction), math.ceil(height / reduction)))
    return decoded_rgb(image)


def located(error: Exception, where: str, index: int | None) -> Exception:
    """The same kind of error, saying which sample could not be loaded and from where."""
    message = f"cannot load sample {index} from {where}: {type(error).__name__}: {error}"
    try:
        return type(error)(message)
    except Exception:
        return OSError(message)
