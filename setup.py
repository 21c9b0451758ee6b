"""The optional native kernels: the JPEG kernel (flowloader.vision._jpeg_kernel), built
against the system's libjpeg-turbo, and the keyed permutation and Philox blocks (flowloader._index_kernel).
Everything else is in pyproject.toml. Where a kernel cannot be built (no compiler, no libjpeg
headers) the install still succeeds and the Pillow or NumPy path runs;
``flowloader.vision.image_backend()`` says which image path runs and why."""

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
    sources=[
        f"{native}/module.c",
        f"{native}/jpeg_kernel.c",
        f"{native}/read_files.c",
        f"{native}/stack_crop.c",
    ],
    depends=[f"{native}/jpeg_kernel.h", f"{native}/read_files.h", f"{native}/stack_crop.h"],
    include_dirs=[os.path.join(p, "include") for p in prefixes],
    library_dirs=[os.path.join(p, "lib") for p in prefixes],
    libraries=["jpeg"],
    # -ffp-contract=off: no fused multiply-adds, so the float conversion rounds as NumPy's.
    extra_compile_args=["-O3", "-std=gnu11", "-ffp-contract=off", "-fvisibility=hidden"],
    optional=os.environ.get("FLOWLOADER_REQUIRE_NATIVE") != "1",
)

# The keyed permutation of flowloader.permutation and the Philox blocks of the vision batch
# draws (no library needed); the NumPy paths give the same values where it cannot be built.
index_kernel = Extension(
    "flowloader._index_kernel",
    sources=[
        "src/flowloader/_native/index_module.c",
        "src/flowloader/_native/permute.c",
        "src/flowloader/_native/philox.c",
    ],
    depends=["src/flowloader/_native/permute.h", "src/flowloader/_native/philox.h"],
    extra_compile_args=["-O3", "-std=gnu11", "-fvisibility=hidden"],
    optional=os.environ.get("FLOWLOADER_REQUIRE_NATIVE") != "1",
)

setup(ext_modules=[kernel, index_kernel])
