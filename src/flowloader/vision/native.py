"""The native JPEG kernel (``flowloader.vision._jpeg_kernel``, built from ``_native/`` against the
system's libjpeg-turbo): it decodes only the region a resize reads, resamples it with Pillow's
filters and writes the finished sample into its batch slot, for a whole batch in one GIL-free
call (:func:`write_batch`). Optional: where it was not built (or ``FLOWLOADER_NATIVE=0``) the
Pillow path runs, and :func:`image_backend` says which runs and why. ``vision/plan.py`` decides
when."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from PIL import Image

from .decode import located

try:
    from . import _jpeg_kernel as _kernel  # type: ignore[attr-defined]

    _missing = None
except ImportError as error:
    _kernel = None
    if importlib.util.find_spec(f"{__package__}._jpeg_kernel") is None:
        _missing = (
            "the native kernel was not built: install a C compiler and libjpeg-turbo's "
            "headers (libjpeg62-turbo-dev, or Homebrew's jpeg-turbo), then reinstall"
        )
    else:  # built, but it does not load (libjpeg missing at run time, say)
        _missing = f"the native kernel does not load ({error})"

_lookup = getattr(_kernel, "lookup", None)  # None in a build older than lookup
_crop = getattr(_kernel, "crop", None)  # None in a build older than crop

# Pillow 13 resamples vertically first for some shapes (python-pillow/Pillow#9549); the
# kernel follows the installed Pillow's order so that its results are Pillow's.
PILLOW_ORDER = int(Image.__version__.split(".")[0]) >= 13

# Pillow's filter numbers that the kernel implements.
FILTERS = frozenset({int(Image.Resampling.BILINEAR), int(Image.Resampling.BICUBIC)})

_OUTPUTS = {"uint8": 0, "float": 1, "normalized": 2}

# jpeg_kernel.c's MAX_MEMORY: the most libjpeg may allocate in one call, up to and including
# the whole-image coefficients of a multi-scan (progressive) file. Beyond it the kernel would
# refuse the file, so such files take the Pillow path, which has no cap.
_LIBJPEG_MEMORY = 1 << 30


def unavailable_reason() -> str | None:
    """Why the kernel does not run, or None when it does."""
    if _missing is not None:
        return _missing
    if os.environ.get("FLOWLOADER_NATIVE", "1") == "0":
        return "the native kernel is switched off (FLOWLOADER_NATIVE=0)"
    return None


def available() -> bool:
    return unavailable_reason() is None


def lookup(
    pixels: np.ndarray, table: np.ndarray, out: np.ndarray, rows: np.ndarray | None = None
) -> bool:
    """``out[n, c] = table[c][pixels[n, c]]`` for uint8 ``pixels`` (N, C, H, W) of any
    strides, a C-contiguous float32 ``table`` (C, 256) and a C-contiguous float32 ``out``,
    in one GIL-free pass. With ``rows`` (int64; a negative one counts from the end, and one
    out of range is an IndexError, as in NumPy) image k of ``out`` comes from image
    ``rows[k]`` of ``pixels``: the gather and the conversion in one. False (nothing
    written) where the kernel does not run, or was built before it had this function."""
    if _lookup is None or not available():
        return False
    if rows is None:
        _lookup(pixels, table, out)
    else:
        _lookup(pixels, table, out, rows)
    return True


def can_crop() -> bool:
    """Whether :func:`crop` runs here (the kernel is built with it and switched on)."""
    return _crop is not None and available()


def crop(
    pixels: np.ndarray,
    rows: np.ndarray,
    window: tuple[np.ndarray, np.ndarray],
    flips: np.ndarray,
    fill: np.ndarray,
    padding: tuple[int, int],
    out: np.ndarray,
    table: np.ndarray | None = None,
) -> None:
    """Image k of ``out`` (C-contiguous (K, C, height, width)): the window at
    ``(top[k], left[k])`` (``window``) of image ``rows[k]`` of uint8 ``pixels`` (N, C, H, W),
    any strides, padded by ``padding`` (top, left) of ``fill`` (uint8, one per channel) on
    every side, mirrored left-right where ``flips[k] & 1`` and top-bottom where
    ``flips[k] & 2``: uint8, or float32 through ``table`` (C, 256), in one GIL-free pass.
    ``rows``, ``top``, ``left``: int64; ``flips``: uint8. Only where :func:`can_crop`."""
    assert _crop is not None
    top, left = window
    args = (pixels, rows, top, left, flips, fill, int(padding[0]), int(padding[1]), out)
    _crop(*args) if table is None else _crop(*args, table)


def read_files(paths: Sequence[str], max_bytes: int) -> list[bytes | None]:
    """The contents of the first files of ``paths`` whose sizes fit in ``max_bytes`` (at
    least one), read with the GIL released twice in all. None for a file it could not read
    (missing, not a regular file, changed while read): the caller reads that one itself, so
    that its error is the one Python's own ``open`` raises."""
    assert _kernel is not None
    return _kernel.read_files(paths, max_bytes)


def image_backend() -> str:
    """Which path decodes planned JPEG pipelines, and why: the native kernel (with the
    libjpeg-turbo it was built against) or Pillow."""
    reason = unavailable_reason()
    if reason is None:
        return f"native ({_kernel.LIBRARY}: region decode, Pillow's resampling, fused output)"
    return f"pillow ({reason})"


class KernelMemoryError(OSError, MemoryError):
    """The kernel could not get the memory one file needs: past its caps (a corrupt header
    claiming a huge image, a huge region to decode) or out of memory. An OSError, as any file
    that cannot be decoded is (``skip_errors=OSError`` skips it), and still a MemoryError."""


class Header(NamedTuple):
    width: int
    height: int
    components: int
    supported: bool  # grey, YCbCr or RGB, complete: the kernel can take it
    multi_scan: bool  # progressive (or a scan per component): libjpeg keeps all coefficients

    def fits_kernel_memory(self) -> bool:
        """Whether libjpeg stays within the kernel's cap on this file. A multi-scan file
        needs 2 bytes per sample for the whole image, row buffers of about 8 bytes per
        column and component, and some 20 KB of tables; counted here with 16-pixel MCUs,
        every component at full resolution, 32 bytes per column and 64 KiB, an upper
        bound (measured with libjpeg-turbo 2.1)."""
        if not self.multi_scan:
            return True
        width, height = _mcu_rounded(self.width), _mcu_rounded(self.height)
        return self.components * width * (2 * height + 32) + (64 << 10) <= _LIBJPEG_MEMORY


def _mcu_rounded(size: int) -> int:
    """``size`` rounded up to whole 16-pixel MCUs (the largest libjpeg pads to)."""
    return -(-size // 16) * 16


def header(data: bytes) -> Header | None:
    """The JPEG header of ``data``, or None when it is not a JPEG the kernel can parse (the
    Pillow path then opens it and reports any error as it always has)."""
    try:
        return Header._make(_kernel.header(data))
    except (OSError, ValueError):
        return None


class Axis(NamedTuple):
    """One axis of the planned resize, as Pillow sees it: an image of ``in_size`` pixels
    (starting at pixel ``origin`` of the decoded image) whose box ``[in0, in1)`` is resized
    to ``out_size`` pixels, of which ``kept`` from ``start`` are kept. A tuple, as the
    kernel takes it."""

    in_size: int
    in0: float
    in1: float
    out_size: int
    start: int
    kept: int
    origin: int = 0


class NativeJpeg:
    """A JPEG whose geometry has been drawn, waiting for its output slot: :meth:`write`
    decodes, resamples, flips and converts it there. ``shape`` is the sample's (3, H, W)."""

    __slots__ = ("data", "filter", "index", "scale", "shape", "where", "x", "y")

    def __init__(
        self, data: bytes, scale: int, x: Axis, y: Axis, resample: int, where: str | None,
        index: int | None,
    ) -> None:  # fmt: skip
        self.data, self.scale, self.x, self.y, self.filter = data, scale, x, y, resample
        self.where, self.index = where, index
        self.shape = (3, y.kept, x.kept)

    def write(
        self, out: np.ndarray | None, conversion: str, hflip: bool, vflip: bool,
        mean_std: tuple[tuple[float, ...], tuple[float, ...]] | None = None,
    ) -> np.ndarray:  # fmt: skip
        """The finished sample, written into ``out`` (allocated when None); ``mean_std``:
        :func:`normalization`'s values, for the "normalized" conversion."""
        dtype = np.uint8 if conversion == "uint8" else np.float32
        if out is None:
            out = np.empty(self.shape, dtype)
        extra = () if mean_std is None else mean_std
        try:
            _kernel.decode_into(
                self.data, out, self.scale, self.x, self.y, self.filter,
                hflip, vflip, _OUTPUTS[conversion], PILLOW_ORDER, *extra,
            )  # fmt: skip
        except (OSError, MemoryError) as error:
            replacement = self.located(error)
            if replacement is error:
                raise
            raise replacement from error
        return out

    def job(self, slot: int, hflip: bool, vflip: bool) -> tuple[Any, ...]:
        """This image as one job of :func:`write_batch`, into ``slot``."""
        return (self.data, slot, self.scale, self.x, self.y, self.filter,
                hflip, vflip)  # fmt: skip

    def located(self, error: Exception) -> Exception:
        """The error to raise for ``error`` from the kernel on this image: a memory error
        becomes a :class:`KernelMemoryError`, and errors name the sample where it is known."""
        if isinstance(error, MemoryError):
            error = KernelMemoryError(str(error))
        if self.where is None or not isinstance(error, OSError):
            return error
        return located(error, self.where, self.index)


def write_batch(
    waiting: Sequence[tuple[NativeJpeg, int, bool, bool]], out: np.ndarray, conversion: str,
    mean_std: tuple[tuple[float, ...], tuple[float, ...]] | None = None,
) -> None:  # fmt: skip
    """Each (image, slot, hflip, vflip) of ``waiting`` decoded into its slot of ``out`` (one
    batch array, every sample the same shape) in one native call that holds the GIL only to
    read the jobs: thread workers then wait for it once per batch, not once per image. Stops
    at the first image that fails and raises its error, as :meth:`NativeJpeg.write` would."""
    extra = () if mean_std is None else mean_std
    jobs = [image.job(slot, hflip, vflip) for image, slot, hflip, vflip in waiting]
    failed = _kernel.decode_batch(jobs, out, _OUTPUTS[conversion], PILLOW_ORDER, *extra)
    if failed is not None:
        position, error = failed
        replacement = waiting[position][0].located(error)
        if replacement is error:
            raise error
        raise replacement from error


def normalization(step: Any) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """A Normalize step's mean and std as three float32 values each (the values NumPy
    computes with), or None when the kernel cannot apply it (other channel counts, a zero
    std: the step-by-step path then runs and reports it)."""
    try:
        mean = np.broadcast_to(np.asarray(step.mean, dtype=np.float32).ravel(), (3,))
        std = np.broadcast_to(np.asarray(step.std, dtype=np.float32).ravel(), (3,))
    except ValueError:
        return None
    if np.any(std == 0):
        return None
    return tuple(float(v) for v in mean), tuple(float(v) for v in std)


def self_check() -> str:
    """Decode one made-up JPEG through the kernel and through Pillow and compare: the kernel
    is present, runs, and gives Pillow's bits. Returns :func:`image_backend`'s line; raises
    RuntimeError otherwise."""
    import io

    if not available():
        raise RuntimeError(image_backend())
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (48, 64, 3), np.uint8)
    encoded = io.BytesIO()
    Image.fromarray(pixels).save(encoded, "JPEG", quality=90)
    data = encoded.getvalue()
    expected = Image.open(io.BytesIO(data)).convert("RGB").crop((5, 3, 55, 43))
    expected = expected.resize((20, 16), Image.Resampling.BILINEAR)
    x, y = Axis(50, 0.0, 50.0, 20, 0, 20, 5), Axis(40, 0.0, 40.0, 16, 0, 16, 3)
    out = NativeJpeg(data, 1, x, y, int(Image.Resampling.BILINEAR), None, None).write(
        None, "uint8", False, False
    )
    if not np.array_equal(out, np.asarray(expected).transpose(2, 0, 1)):
        raise RuntimeError("the native kernel runs but does not give Pillow's pixels")
    return image_backend()
