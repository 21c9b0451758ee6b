"""The native JPEG kernel (flowloader.vision.native): Pillow's bits on ImageNet-sized files,
bounded difference where it decodes at a reduced scale, the same random draws as the Pillow
path, every other file on the Pillow path, errors that name the file, and the same bytes from
many threads. CI builds the kernel and fails if it is missing; elsewhere these tests skip."""

from __future__ import annotations

import contextlib
import io
import os
import threading
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

import flowloader as fl
from flowloader.errors import SkippedSampleWarning
from flowloader.randomness import SampleRngs, SampleSeeds
from flowloader.vision import datasets, native
from flowloader.vision import plan as plan_module
from flowloader.vision import transforms as T
from flowloader.vision.datasets.fake import natural_image

# CI sets FLOWLOADER_REQUIRE_NATIVE=1: there a missing kernel fails these tests.
REQUIRED = os.environ.get("FLOWLOADER_REQUIRE_NATIVE") == "1"
pytestmark = pytest.mark.skipif(
    not native.available() and not REQUIRED,
    reason=f"native kernel: {native.unavailable_reason()}",
)
kernel = native._kernel

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def jpeg(width: int, height: int, seed: int = 0, mode: str = "RGB", **options) -> bytes:
    image = natural_image(np.random.default_rng(seed), width, height).convert(mode)
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=options.pop("quality", 90), **options)
    return out.getvalue()


# Every JPEG layout the kernel takes: chroma subsampling, progressive, restart markers, grey.
LAYOUTS = {
    "4:2:0": {"subsampling": 2},
    "4:2:2": {"subsampling": 1},
    "4:4:4": {"subsampling": 0},
    "progressive": {"progressive": True},
    "restart markers": {"restart_marker_blocks": 3},
    "grey": {"mode": "L"},
}


@pytest.fixture(scope="module")
def imagenet_sized(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("imagenet_sized")
    for k, (name, options) in enumerate(LAYOUTS.items()):
        folder = root / name.replace(" ", "_").replace(":", "")
        folder.mkdir()
        for i, size in enumerate([(500, 375), (375, 500), (333, 500)]):
            (folder / f"{i}.jpg").write_bytes(jpeg(*size, seed=10 * k + i, **dict(options)))
    return str(root)


def train(rng, interpolation=T.InterpolationMode.BILINEAR):
    return T.Compose(
        [
            T.RandomResizedCrop(224, interpolation=interpolation, rng=rng),
            T.RandomHorizontalFlip(rng=rng),
            T.RandomVerticalFlip(rng=rng),
            T.ToTensor(),
            T.Normalize(MEAN, STD),
        ]
    )


PIPELINES = {
    "train": train,
    "train bicubic": lambda rng: train(rng, T.InterpolationMode.BICUBIC),
    "train uint8": lambda rng: T.Compose(
        [T.RandomResizedCrop(224, rng=rng), T.RandomHorizontalFlip(rng=rng), T.PILToTensor()]
    ),
    "val": lambda rng: T.Compose(
        [T.Resize(256), T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)]
    ),
    "val uint8": lambda rng: T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()]),
    "resize only": lambda rng: T.Compose([T.Resize((200, 150)), T.ToTensor()]),
}


def both(root: str, make, generators: list | None = None) -> tuple:
    """The default dataset (the kernel) and the exact Pillow path, with equal generators
    (appended to ``generators``)."""
    rngs = [np.random.default_rng(7), np.random.default_rng(7)]
    if generators is not None:
        generators.extend(rngs)
    fast = datasets.ImageFolder(root, transform=make(rngs[0]))
    exact = datasets.ImageFolder(root, transform=make(rngs[1]), reduced_decode=False)
    return fast, exact


def batch(dataset, indices) -> np.ndarray:
    images = dataset.__getitems__(list(indices))
    return np.stack([images[k][0] for k in range(len(indices))])


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_imagenet_sized_files_give_pillows_bits(imagenet_sized, pipeline) -> None:
    """No reduced scale applies to a 224 crop of a 500x375 file: the region decode and the
    resampling give exactly torchvision's PIL path (reduced_decode=False), and the random
    draws are the same ones."""
    generators: list = []
    fast, exact = both(imagenet_sized, PIPELINES[pipeline], generators)
    indices = range(len(fast))
    np.testing.assert_array_equal(batch(fast, indices), batch(exact, indices))
    one_by_one = np.stack([fast[i][0] for i in indices])
    np.testing.assert_array_equal(one_by_one, np.stack([exact[i][0] for i in indices]))
    assert generators[0].random() == generators[1].random()


def kernel_jobs(monkeypatch) -> list:
    """The jobs the kernel writes from now on (the files it takes), in order."""
    written: list = []
    write, write_batch = native.NativeJpeg.write, native.write_batch
    monkeypatch.setattr(
        native.NativeJpeg, "write", lambda job, *args: written.append(job) or write(job, *args)
    )
    monkeypatch.setattr(
        native,
        "write_batch",
        lambda waiting, *args: (
            written.extend(job for job, *_ in waiting) or write_batch(waiting, *args)
        ),
    )
    return written


def test_image_folder_batches_go_through_the_kernel(imagenet_sized, monkeypatch) -> None:
    assert native.available(), native.image_backend()
    written = kernel_jobs(monkeypatch)
    fast, _ = both(imagenet_sized, PIPELINES["train"])
    batch(fast, range(4))
    assert len(written) == 4


def test_random_crops_and_sizes_give_pillows_bits() -> None:
    """Crop boxes and output sizes of every shape, through the kernel's call, against
    Pillow's crop + resize (including the shapes where Pillow 13 resamples vertically
    first)."""
    rng = np.random.default_rng(3)
    for case in range(40):
        width, height = (int(v) for v in rng.integers(40, 400, 2))
        options = dict(list(LAYOUTS.values())[case % len(LAYOUTS)])
        data = jpeg(width, height, seed=case, **options)
        reference = Image.open(io.BytesIO(data)).convert("RGB")
        for _ in range(4):
            w, h = int(rng.integers(1, width + 1)), int(rng.integers(1, height + 1))
            left, top = int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1))
            out_w, out_h = (int(v) for v in rng.integers(2, 300, 2))
            if case % 3 == 0:  # a tall shrink: the vertical pass first in Pillow >= 13
                out_h = max(1, h // 6)
            resample = [Image.Resampling.BILINEAR, Image.Resampling.BICUBIC][case % 2]
            expected = reference.crop((left, top, left + w, top + h)).resize(
                (out_w, out_h), resample
            )
            out = np.empty((3, out_h, out_w), np.uint8)
            x = native.Axis(w, 0.0, float(w), out_w, 0, out_w, left)
            y = native.Axis(h, 0.0, float(h), out_h, 0, out_h, top)
            native.NativeJpeg(data, 1, x, y, int(resample), None, None).write(
                out, "uint8", False, False
            )
            np.testing.assert_array_equal(out, np.asarray(expected).transpose(2, 0, 1))


@pytest.mark.skipif(
    not getattr(kernel, "AVX2", False),
    reason="no AVX2 passes here (not an x86-64 build, or the CPU lacks AVX2): both runs "
    "would take the portable passes",
)
def test_the_portable_passes_give_the_avx2_passes_bytes() -> None:
    """x86-64 machines run the AVX2 passes; ARM machines run the portable ones. Both must
    give the same bytes, for every output, flip, filter and pass order (Pillow 13's, which
    can run the vertical pass first, and the older one)."""
    rng = np.random.default_rng(5)
    normalize = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    for case in range(24):
        width, height = (int(v) for v in rng.integers(20, 300, 2))
        data = jpeg(width, height, seed=case, **dict(list(LAYOUTS.values())[case % 6]))
        w, h = int(rng.integers(1, width + 1)), int(rng.integers(1, height + 1))
        left, top = int(rng.integers(0, width - w + 1)), int(rng.integers(0, height - h + 1))
        out_w, out_h = (
            int(rng.integers(1, 240)),
            max(1, int(rng.integers(1, 240)) // (case % 3 + 1)),
        )
        x, y = (w, 0.0, float(w), out_w, 0, out_w, left), (h, 0.0, float(h), out_h, 0, out_h, top)
        output, pillow_order = case % 3, case // 3 % 2 == 0
        extra = normalize if output == 2 else ()
        results = []
        for portable in (False, True):
            out = np.empty((3, out_h, out_w), np.uint8 if output == 0 else np.float32)
            kernel.decode_into(
                data, out, 1, x, y, 2 + case % 2, case % 2 == 0, case % 4 < 2, output,
                pillow_order, *extra, portable=portable,
            )  # fmt: skip
            results.append(out)
        np.testing.assert_array_equal(results[0], results[1])


@pytest.fixture(scope="module")
def camera_sized(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("camera_sized")
    (root / "a").mkdir()
    for i in range(4):
        (root / "a" / f"{i}.jpg").write_bytes(jpeg(2048, 1536, seed=i))
    return str(root)


# Stated bounds, in levels of 255, against torchvision's PIL path on the same crop; measured
# on 2048x1536 photos: train mean 0.60 / p99.9 5, val mean 0.85 / p99.9 4.
@pytest.mark.parametrize("pipeline", ["train uint8", "val uint8"])
def test_reduced_scale_on_camera_sized_files_is_bounded(camera_sized, pipeline) -> None:
    fast, exact = both(camera_sized, PIPELINES[pipeline])
    indices = range(len(fast))
    difference = np.abs(batch(fast, indices).astype(int) - batch(exact, indices))
    assert 0 < difference.mean() <= 1.0
    assert np.quantile(difference, 0.999) <= 8


def test_both_paths_map_a_reduced_decode_alike(tmp_path, monkeypatch) -> None:
    """At a reduced DCT scale, pixel x of a file is pixel x / scale of the decoded image on
    the kernel's path and on Pillow's, for sizes no scale divides: the same bytes. (On
    these Pillow's draft decodes at 1/4, though asked for 1/8; the kernel picks 1/4.)"""
    (tmp_path / "a").mkdir()
    for i, size in enumerate([(2001, 1501), (2003, 1499), (1998, 1502)]):
        (tmp_path / "a" / f"{i}.jpg").write_bytes(jpeg(*size, seed=i))
    dataset = datasets.ImageFolder(
        str(tmp_path), transform=T.Compose([T.Resize((150, 200)), T.PILToTensor()])
    )
    written = kernel_jobs(monkeypatch)
    kernels = batch(dataset, range(3))
    assert [job.scale for job in written] == [4, 4, 4]
    monkeypatch.setenv("FLOWLOADER_NATIVE", "0")
    np.testing.assert_array_equal(kernels, batch(dataset, range(3)))


def test_other_files_take_the_pillow_path(tmp_path) -> None:
    """CMYK JPEGs and PNGs are not the kernel's: they give the exact path's result."""
    (tmp_path / "a").mkdir()
    image = natural_image(np.random.default_rng(0), 300, 200)
    image.convert("CMYK").save(tmp_path / "a" / "cmyk.jpg", quality=90)
    image.save(tmp_path / "a" / "plain.png")
    assert not native.header((tmp_path / "a" / "cmyk.jpg").read_bytes()).supported
    assert native.header((tmp_path / "a" / "plain.png").read_bytes()) is None
    fast, exact = both(str(tmp_path), PIPELINES["train"])
    np.testing.assert_array_equal(batch(fast, [0, 1]), batch(exact, [0, 1]))


def bad_folder(tmp_path, data: bytes) -> datasets.ImageFolder:
    (tmp_path / "a").mkdir(exist_ok=True)
    (tmp_path / "a" / "0.jpg").write_bytes(jpeg(300, 200))
    (tmp_path / "a" / "1_bad.jpg").write_bytes(data)
    return datasets.ImageFolder(str(tmp_path), transform=PIPELINES["train"](None))


def undefined_table(data: bytes) -> bytes:
    """``data`` whose scan names a Huffman table that was never defined: the header reads,
    the decode fails (in the kernel, and in Pillow)."""
    selector = data.index(b"\xff\xda") + 6  # the first component's table selectors
    return data[:selector] + b"\x33" + data[selector + 1 :]


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: data[: len(data) // 2], id="truncated"),
        pytest.param(lambda data: data[:300], id="cut in the header"),
        pytest.param(undefined_table, id="undefined table"),
    ],
)
def test_a_damaged_file_is_an_error_naming_it(tmp_path, damage) -> None:
    data = damage(jpeg(300, 200, seed=1))
    dataset = bad_folder(tmp_path, data)
    with pytest.raises(OSError, match=r"cannot load sample 1 from .*1_bad\.jpg"):
        dataset.__getitems__([0, 1])
    with pytest.raises(OSError, match=r"cannot load sample 1 from .*1_bad\.jpg"):
        dataset[1]


def test_the_earliest_bad_sample_of_a_batch_is_the_one_named(tmp_path) -> None:
    """The kernel writes a batch's images in one call after reading all of their files: a
    damaged image is still reported before a later sample whose file cannot be read, as
    when each image is finished as it comes."""
    bad_folder(tmp_path, undefined_table(jpeg(300, 200, seed=1)))
    (tmp_path / "a" / "2_gone.jpg").write_bytes(jpeg(300, 200, seed=2))
    dataset = datasets.ImageFolder(str(tmp_path), transform=PIPELINES["train"](None))
    (tmp_path / "a" / "2_gone.jpg").unlink()
    with pytest.raises(OSError, match=r"cannot load sample 1 from .*1_bad\.jpg") as caught:
        dataset.__getitems__([0, 1, 2])
    later = caught.value.__context__  # raised while the later sample's error was handled
    assert isinstance(later, FileNotFoundError)
    assert "2_gone.jpg" in str(later)
    with pytest.raises(FileNotFoundError, match=r"cannot load sample 2 from .*2_gone\.jpg"):
        dataset.__getitems__([2, 1])


@pytest.mark.parametrize("num_workers", [0, 2])
def test_skip_errors_drops_a_damaged_file(tmp_path, num_workers) -> None:
    dataset = bad_folder(tmp_path, jpeg(300, 200)[:5000])
    loader = fl.DataLoader(dataset, batch_size=2, num_workers=num_workers, skip_errors=OSError)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batches = list(loader)
    assert [len(labels) for _, labels in batches] == [1]
    assert batches[0][0].shape == (1, 3, 224, 224)
    messages = [str(w.message) for w in caught if issubclass(w.category, SkippedSampleWarning)]
    assert len(messages) == 1
    assert "1_bad.jpg" in messages[0]


def test_eight_threads_give_one_threads_bytes(imagenet_sized) -> None:
    """The kernel releases the GIL and keeps no state: many threads at once give the bytes
    one thread gives."""
    fast, _ = both(imagenet_sized, PIPELINES["val"])
    indices = list(range(len(fast)))
    expected = batch(fast, indices)
    results: dict[int, list[np.ndarray]] = {}

    def hammer(thread: int) -> None:
        results[thread] = [batch(fast, indices) for _ in range(3)]

    threads = [threading.Thread(target=hammer, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(results) == list(range(8))
    for arrays in results.values():
        for array in arrays:
            np.testing.assert_array_equal(array, expected)


def test_bad_calls_are_refused() -> None:
    data = jpeg(64, 48)
    x, y = (64, 0.0, 64.0, 32, 0, 32, 0), (48, 0.0, 48.0, 24, 0, 24, 0)
    out = np.empty((3, 24, 32), np.uint8)
    kernel.decode_into(data, out, 1, x, y, 2, False, False, 0, True)
    with pytest.raises(ValueError, match="out has"):
        kernel.decode_into(data, np.empty((3, 24, 31), np.uint8), 1, x, y, 2, False, False, 0, True)
    strided = np.empty((3, 24, 64), np.uint8)[:, :, ::2]
    with pytest.raises(TypeError, match="read-write bytes-like"):
        kernel.decode_into(data, strided, 1, x, y, 2, False, False, 0, True)
    with pytest.raises(ValueError, match="does not fit"):
        kernel.decode_into(data, out, 1, (64, 0.0, 64.0, 32, 0, 32, 5), y, 2, False, False, 0, True)
    with pytest.raises(ValueError, match="scale, filter or output"):
        kernel.decode_into(data, out, 3, x, y, 2, False, False, 0, True)
    with pytest.raises(ValueError, match="scale, filter or output"):
        kernel.decode_into(data, out, 1, x, y, 0, False, False, 0, True)
    with pytest.raises(kernel.UnsupportedError):
        kernel.decode_into(b"GIF89a....", out, 1, x, y, 2, False, False, 0, True)


class CountingSeeds(SampleSeeds):
    """SampleSeeds that record which generators are built."""

    def __init__(self, epoch_seed: int) -> None:
        super().__init__(epoch_seed)
        self.made: list[int] = []

    def generator(self, index: int) -> np.random.Generator:
        self.made.append(index)
        return super().generator(index)


def test_a_batch_builds_generators_only_where_steps_draw(imagenet_sized) -> None:
    """With the loader's per-sample generators: none built for a pipeline that draws nothing,
    one for the whole batch (reset per sample) on the kernel's path, and the same samples as
    fresh generators give."""
    indices = [5, 0, 9, 2]
    seeds = CountingSeeds(3)
    val = datasets.ImageFolder(imagenet_sized, transform=PIPELINES["val uint8"](None))
    val.__getitems__(indices, SampleRngs(seeds, indices))
    assert seeds.made == []
    train = datasets.ImageFolder(imagenet_sized, transform=PIPELINES["train"](None))
    got = train.__getitems__(indices, SampleRngs(seeds, indices))
    assert seeds.made == [5]
    asked = []

    def loader(path):  # a user's loader drawing the torch way
        asked.append(fl.sample_rng().random())
        return Image.open(path).convert("RGB")

    custom = datasets.ImageFolder(
        imagenet_sized, transform=PIPELINES["val uint8"](None), loader=loader
    )
    custom.__getitems__(indices, SampleRngs(SampleSeeds(3), indices))
    assert asked == [SampleSeeds(3).generator(i).random() for i in indices]
    fresh = [seeds.generator(i) for i in indices]  # a plain list: a generator per sample
    expected = train.__getitems__(indices, fresh)
    np.testing.assert_array_equal(got.columns[0], expected.columns[0])
    assert not np.array_equal(got.columns[0][0], got.columns[0][1])


def test_a_batch_of_large_files_is_written_in_bounded_calls(imagenet_sized, monkeypatch) -> None:
    """The files waiting for the batch's call are bounded (plan.WAITING_BYTES): past it the
    waiting images are written early, with the same result."""
    fast, _ = both(imagenet_sized, PIPELINES["val"])
    expected = batch(fast, range(6))
    calls: list[int] = []
    write_batch = native.write_batch
    monkeypatch.setattr(
        native,
        "write_batch",
        lambda waiting, *args: calls.append(len(waiting)) or write_batch(waiting, *args),
    )
    batch(fast, range(6))
    assert calls == [6]
    calls.clear()
    monkeypatch.setattr(plan_module, "WAITING_BYTES", 2 * len(jpeg(500, 375)))
    np.testing.assert_array_equal(batch(fast, range(6)), expected)
    assert sum(calls) == 6
    assert 1 < len(calls) < 6


def test_one_batch_call_writes_each_job_as_its_own_call_does() -> None:
    """decode_batch: each job into its slot (any order), the bytes decode_into writes."""
    x, y = (64, 0.0, 64.0, 32, 0, 32, 0), (48, 0.0, 48.0, 24, 0, 24, 0)
    files = [jpeg(64, 48, seed=seed) for seed in range(3)]
    flips = [(False, False), (True, False), (True, True)]
    expected = np.empty((3, 3, 24, 32), np.float32)
    for k, (data, (hflip, vflip)) in enumerate(zip(files, flips, strict=True)):
        kernel.decode_into(data, expected[k], 1, x, y, 2, hflip, vflip, 2, True, MEAN, STD)
    out = np.full((4, 3, 24, 32), -9, np.float32)
    slots = [3, 0, 2]
    jobs = [
        (data, slot, 1, x, y, 2, *flip)
        for data, slot, flip in zip(files, slots, flips, strict=True)
    ]
    assert kernel.decode_batch(jobs, out, 2, True, MEAN, STD) is None
    np.testing.assert_array_equal(out[slots], expected)
    assert (out[1] == -9).all()
    assert kernel.decode_batch([], out, 2, True) is None


def test_a_batch_call_stops_at_the_first_job_that_fails() -> None:
    """The failing job's position and its error come back (not raised), so that the
    caller can name the sample; the jobs after it are not decoded."""
    x, y = (64, 0.0, 64.0, 32, 0, 32, 0), (48, 0.0, 48.0, 24, 0, 24, 0)
    good, broken = jpeg(64, 48), undefined_table(jpeg(64, 48, seed=1))
    out = np.zeros((3, 3, 24, 32), np.uint8)
    jobs = [(good, k, 1, x, y, 2, False, False) for k in range(3)]
    jobs[1] = (broken, 1, 1, x, y, 2, False, False)
    position, error = kernel.decode_batch(jobs, out, 0, True)
    assert position == 1
    assert type(error) is OSError
    assert str(error).startswith("broken JPEG data")
    assert out[0].any()
    assert not out[2].any()
    jobs[1] = (b"GIF89a....", 1, 1, x, y, 2, False, False)
    position, error = kernel.decode_batch(jobs, out, 0, True)
    assert (position, type(error)) == (1, kernel.UnsupportedError)


def test_bad_batch_calls_are_refused() -> None:
    data = jpeg(64, 48)
    x, y = (64, 0.0, 64.0, 32, 0, 32, 0), (48, 0.0, 48.0, 24, 0, 24, 0)
    out = np.empty((2, 3, 24, 32), np.uint8)
    for slot in (-1, 2):
        with pytest.raises(ValueError, match=f"slot {slot} does not fit"):
            kernel.decode_batch([(data, slot, 1, x, y, 2, False, False)], out, 0, True)
    other = (64, 0.0, 64.0, 16, 0, 16, 0)
    mixed = [(data, 0, 1, x, y, 2, False, False), (data, 1, 1, other, y, 2, False, False)]
    with pytest.raises(ValueError, match="every job the same shape"):
        kernel.decode_batch(mixed, out, 0, True)
    with pytest.raises(TypeError, match="a job is"):
        kernel.decode_batch([(data, 0, 1, x)], out, 0, True)
    with pytest.raises(TypeError):
        kernel.decode_batch(((data, 0, 1, x, y, 2, False, False),), out, 0, True)
    with pytest.raises(TypeError, match="read-write bytes-like"):
        kernel.decode_batch([], out[:, :, :, ::2], 0, True)


INT_MAX = 2**31 - 1


@pytest.mark.parametrize("axis", ["x", "y"])
@pytest.mark.parametrize(
    "geometry",
    [
        pytest.param((100, 0.0, 100.0, 100, 0, 1, INT_MAX - 50), id="origin"),
        pytest.param((48, 0.0, 48.0, 100, INT_MAX, 1, 0), id="out_start"),
    ],
)
def test_axis_values_near_int_max_are_refused(axis, geometry) -> None:
    """Values only the private call can pass, whose sums overflow an int: refused as a bad
    geometry, not read outside the decoded image (or a crash)."""
    data = jpeg(64, 48)
    fine = (48, 0.0, 48.0, 24, 0, 24, 0)
    x, y = (geometry, fine) if axis == "x" else (fine, geometry)
    out = np.empty((3, y[5], x[5]), np.uint8)
    with pytest.raises(ValueError, match="does not fit"):
        kernel.decode_into(data, out, 1, x, y, 2, False, False, 0, True)


def claiming_a_huge_image() -> bytes:
    """A few hundred bytes whose progressive header claims 60000 x 60000 pixels."""
    data = bytearray(jpeg(32, 32, progressive=True))
    sof = data.index(b"\xff\xc2")
    data[sof + 5 : sof + 9] = (60000).to_bytes(2, "big") * 2  # height, width
    return bytes(data)


def test_a_header_claiming_a_huge_image_is_refused_without_allocating_it() -> None:
    """libjpeg would allocate coefficients for all of its pixels; the kernel caps what
    libjpeg allocates at 1 GiB."""
    out = np.empty((3, 8, 8), np.uint8)
    axis = (16, 0.0, 16.0, 8, 0, 8, 0)
    with pytest.raises(MemoryError, match="more than 1 GiB"):
        kernel.decode_into(claiming_a_huge_image(), out, 1, axis, axis, 2, False, False, 0, True)


def test_a_progressive_file_past_the_kernels_memory_takes_the_pillow_path(
    tmp_path, monkeypatch
) -> None:
    """libjpeg keeps a progressive file's coefficients for the whole image. Where they
    would pass the kernel's cap (lowered here to 1 MiB; in use 1 GiB, some 180 MP) the
    file takes the Pillow path, which has none, and gives its result; baseline files,
    which need no such buffer, still take the kernel."""
    monkeypatch.setattr(native, "_LIBJPEG_MEMORY", 1 << 20)
    (tmp_path / "a").mkdir()
    progressive, baseline = jpeg(500, 375, progressive=True), jpeg(500, 375, seed=1)
    (tmp_path / "a" / "0.jpg").write_bytes(progressive)
    (tmp_path / "a" / "1.jpg").write_bytes(baseline)
    assert not native.header(progressive).fits_kernel_memory()
    written = kernel_jobs(monkeypatch)
    fast, exact = both(str(tmp_path), PIPELINES["train"])
    np.testing.assert_array_equal(batch(fast, [0, 1]), batch(exact, [0, 1]))
    assert [job.data for job in written] == [baseline]


def test_the_kernels_memory_error_names_the_file_and_is_skipped(tmp_path, monkeypatch) -> None:
    """A file the kernel refuses for memory (the huge claim, let through to it here by
    lifting Pillow's pixel limit and the planner's memory check) is an OSError naming the
    file, as a corrupt one is: ``skip_errors=OSError`` skips it. It stays a MemoryError."""
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)
    monkeypatch.setattr(native, "_LIBJPEG_MEMORY", 1 << 62)
    dataset = bad_folder(tmp_path, claiming_a_huge_image())
    with pytest.raises(OSError, match=r"sample 1 from .*1_bad\.jpg.*more than 1 GiB") as caught:
        dataset.__getitems__([0, 1])
    assert isinstance(caught.value, MemoryError)
    loader = fl.DataLoader(dataset, batch_size=2, skip_errors=OSError)
    with warnings.catch_warnings(record=True) as skipped:
        warnings.simplefilter("always")
        assert [len(labels) for _, labels in loader] == [1]
    assert any("1_bad.jpg" in str(w.message) for w in skipped)


def test_image_backend_says_which_path_runs(monkeypatch) -> None:
    assert native.image_backend().startswith("native (libjpeg")
    monkeypatch.setenv("FLOWLOADER_NATIVE", "0")
    assert native.image_backend() == (
        "pillow (the native kernel is switched off (FLOWLOADER_NATIVE=0))"
    )
    assert fl.vision.image_backend() == native.image_backend()


SEED_JPEGS = [
    jpeg(40, 30, seed=1),
    jpeg(33, 47, seed=2, progressive=True),
    jpeg(48, 40, seed=3, mode="L"),
    jpeg(64, 16, seed=4, subsampling=1, restart_marker_blocks=1),
]
GUARD = 64  # bytes of a known pattern on each side of the fuzzed call's output


@st.composite
def axis_in(draw, decoded: int) -> tuple:
    """One axis of a call on an image of ``decoded`` pixels: inside it (one pixel past it
    at times, which the kernel must refuse), with a fractional box or the whole, an output
    the box's size or another, and a sub-range of the output kept."""
    origin = draw(st.integers(0, decoded - 1))
    in_size = draw(st.integers(1, decoded - origin + 1))
    in0, in1 = 0.0, float(in_size)
    if draw(st.booleans()):
        eighths = draw(st.lists(st.integers(0, 8 * in_size), min_size=2, max_size=2, unique=True))
        in0, in1 = min(eighths) / 8, max(eighths) / 8
    out_size = draw(st.one_of(st.just(in_size), st.integers(1, 80)))
    out_start = draw(st.integers(0, out_size - 1))
    out_count = draw(st.integers(1, out_size - out_start))
    return (in_size, in0, in1, out_size, out_start, out_count, origin)


@st.composite
def kernel_calls(draw) -> tuple[bytes, dict]:
    """A seed JPEG, perhaps damaged, and a call drawn around its size at the drawn scale,
    every option varied."""
    seed = draw(st.sampled_from(range(len(SEED_JPEGS))))
    scale = draw(st.sampled_from([1, 2, 4, 8]))
    width, height = Image.open(io.BytesIO(SEED_JPEGS[seed])).size
    data = bytearray(SEED_JPEGS[seed])
    if draw(st.booleans()):  # damaged half the time: the rest reaches the resampling
        flips = st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=6)
        for at, flip in draw(flips):
            data[at % len(data)] ^= flip
        if draw(st.booleans()):
            data = data[: draw(st.integers(0, len(data)))]
    call = {
        "scale": scale,
        "x": draw(axis_in(-(-width // scale))),
        "y": draw(axis_in(-(-height // scale))),
        "filter": draw(st.sampled_from([2, 3])),
        "hflip": draw(st.booleans()),
        "vflip": draw(st.booleans()),
        "output": draw(st.sampled_from([0, 1, 2])),
        "pillow_order": draw(st.booleans()),
        "portable": draw(st.booleans()),
        "mean": MEAN,
        "std": STD,
    }
    return bytes(data), call


def guarded_output(shape: tuple[int, ...], dtype) -> tuple[np.ndarray, np.ndarray]:
    """An output array inside a larger buffer, with GUARD bytes of 0xA5 on each side that
    show any write past its ends; returns (the array, the whole buffer)."""
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    buffer = np.full(size + 2 * GUARD, 0xA5, np.uint8)
    return buffer[GUARD : GUARD + size].view(dtype).reshape(shape), buffer


@settings(
    max_examples=400, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)
@given(kernel_calls())
def test_mutated_jpegs_never_crash_the_kernel(case) -> None:
    """Any bytes, any geometry in and around the decoded image, any options: a result or a
    Python error, never a crash, a hang or a write outside ``out``."""
    data, call = case
    shape = (3, call["y"][5], call["x"][5])
    out, buffer = guarded_output(shape, np.uint8 if call["output"] == 0 else np.float32)
    with contextlib.suppress(OSError, ValueError):
        kernel.decode_into(data, out, **call)
    assert (buffer[:GUARD] == 0xA5).all()
    assert (buffer[GUARD + out.nbytes :] == 0xA5).all()
