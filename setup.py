"""The optional native JPEG kernel (flowloader.vision._jpeg_kernel), built against the system's
libjpeg-turbo. Everything else is in pyproject.toml. Where the kernel cannot be built (no
compiler, no libjpeg headers) the install still succeeds and the Pillow path runs;
``flowloader.vision.image_backend()`` says which path runs and why."""

import os
import sys

from setuptools import Extension, setup


def jpeg_prefixes() -> list[str]:
    """Where libjpeg-turbo may live besides the compiler's default paths:
    $FLOWLOADER_JPEG_PREFIX, then Homebrew's jpeg-turbo."""
    prefixes = [os.environ.get("FLOWLOADER_JPEG_PREFIX", "")]
    if sys.platform == "darwin":
        prefixes += ["/opt/homebrew/opt/jpeg-turbo", "/usr/local/opt/jpeg-turbo"]
    return [p for p in prefixes if p and os.path.isdir(os.path.join(p, "include"))]


native = "src/flowloader/vision/_native"
prefixes = jpeg_prefixes()
kernel = Extension(
    "flowloader.vision._jpeg_kernel",
    sources=[f"{native}/module.c", f"{native}/jpeg_kernel.c", f"{native}/read_files.c"],
    depends=[f"{native}/jpeg_kernel.h", f"{native}/read_files.h"],
    include_dirs=[os.path.join(p, "include") for p in prefixes],
    library_dirs=[os.path.join(p, "lib") for p in prefixes],
    libraries=["jpeg"],
    # -ffp-contract=off: no fused multiply-adds, so the float conversion rounds as NumPy's.
    extra_compile_args=["-O3", "-std=gnu11", "-ffp-contract=off", "-fvisibility=hidden"],
    optional=os.environ.get("FLOWLOADER_REQUIRE_NATIVE") != "1",
)

setup(ext_modules=[kernel])
