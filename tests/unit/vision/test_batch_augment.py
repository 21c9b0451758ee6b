"""The batch plan for images in memory (flowloader.vision.stack_plan): a batch is, bit for
bit, np.stack of the per-sample path for the same indices, for random pipelines, batch
compositions, image shapes and seeds; and the batch draws are the generators' own."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowloader.batching import load_one_by_one
from flowloader.permutation import index_kernel
from flowloader.randomness import SampleRngs, SampleSeeds
from flowloader.vision import transforms as T
from flowloader.vision.datasets.array_images import ArrayImageDataset
from flowloader.vision.plan import explain, plan_for
from flowloader.vision.stack_plan import compile_stack
from flowloader.vision.transforms.batch_rng import PhiloxDraws, numpy_philox_block, philox_block

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.247, 0.243, 0.261)


class InMemory(ArrayImageDataset):
    """An array dataset over pixels given directly."""

    def __init__(self, data: np.ndarray, transform: Any = None) -> None:
        self._pixels = data
        super().__init__("unused", transform=transform)

    def _check_exists(self) -> bool:
        return True

    def _load(self) -> None:
        self.data = self._pixels
        self._labels = np.arange(len(self._pixels), dtype=np.int64) % 10

    def label_array(self) -> np.ndarray:
        return self._labels


def per_sample(dataset: ArrayImageDataset, indices: list[int], seed: int) -> np.ndarray:
    rngs = SampleRngs(SampleSeeds(seed), indices)
    return np.stack([image for image, _ in load_one_by_one(dataset, indices, rngs)])


def batched(dataset: ArrayImageDataset, indices: list[int], seed: int) -> np.ndarray:
    batch = dataset.__getitems__(indices, SampleRngs(SampleSeeds(seed), indices))
    return batch.columns[0]


def assert_same_bits(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype
    assert a.shape == b.shape
    assert a.tobytes() == b.tobytes()


# The draws -------------------------------------------------------------------------------


@pytest.mark.parametrize("compute", [philox_block, numpy_philox_block], ids=["native", "numpy"])
def test_one_philox_block_is_numpys(compute) -> None:
    if compute is philox_block and not hasattr(index_kernel(), "philox_into"):
        pytest.skip("the index kernel was not built: philox_block is the NumPy code")
    keys = np.array([0, 1, 12345, 2**62 + 3, 2**63 - 1, 2**64 - 1], dtype=np.uint64)
    for key0 in (987654321, 2**64 - 1):
        for counter in (1, 2, 7):
            block = compute(key0, keys, counter)
            for k, key in enumerate(keys):
                generator = np.random.Philox(key=np.array([key0, key], np.uint64))
                words = generator.random_raw(4 * counter)[-4:]
                assert block[k].tolist() == words.tolist()


_DRAW = st.one_of(
    st.tuples(st.just("random")),
    st.tuples(st.just("permutation"), st.integers(1, 9)),
    st.tuples(
        st.just("integers-each"), st.lists(st.integers(1, 2**32 - 1), min_size=12, max_size=12)
    ),
    st.tuples(st.just("uniform"), st.floats(-5, 5), st.floats(0, 10)),
    st.tuples(
        st.just("integers"),
        st.integers(-4, 4),
        st.sampled_from([1, 2, 3, 9, 41, 2**31 + 7, 3 * 2**30 + 1, 2**32 - 1, 2**32]),
    ),
)


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**64 - 1),
    indices=st.lists(st.integers(0, 2**63 - 1), min_size=1, max_size=12),
    draws=st.lists(st.tuples(_DRAW, st.one_of(st.none(), st.integers(0, 2**12 - 1))), max_size=14),
)
def test_batch_draws_are_each_generators_own(seed, indices, draws) -> None:
    """Any sequence of random/uniform/integers draws, each for a subset of the samples (the
    rejection loop of integers included: 3 * 2**30 + 1 values reject a quarter of draws)."""
    batch = PhiloxDraws(seed, indices)
    generators = [SampleSeeds(seed).generator(i) for i in indices]
    for (kind, *args), subset in draws:
        mask = None if subset is None else np.array([(subset >> k) & 1 == 1 for k in range(12)])
        mask = None if mask is None else mask[: len(indices)]
        if kind == "uniform":
            args = [args[0], args[0] + args[1]]
        if kind == "integers":
            args = [args[0], args[0] + args[1]]
        if kind == "permutation":  # every sample draws (no mask)
            got = batch.permutation(args[0])
            for k, generator in enumerate(generators):
                assert got[k].tolist() == generator.permutation(args[0]).tolist()
            continue
        if kind == "integers-each":  # one bound per sample
            highs = np.array(args[0][: len(indices)])
            got = batch.integers(0, highs, mask)
            for k, generator in enumerate(generators):
                if mask is None or mask[k]:
                    assert got[k] == generator.integers(0, int(highs[k])), (highs, k)
            continue
        got = getattr(batch, kind)(*args, mask)
        for k, generator in enumerate(generators):
            if mask is None or mask[k]:
                assert got[k] == getattr(generator, kind)(*args), (kind, args, k)


def test_a_range_of_one_value_draws_nothing_and_an_empty_range_raises() -> None:
    batch = PhiloxDraws(3, [1, 2])
    assert batch.integers(5, 6).tolist() == [5, 5]
    assert batch.random().tolist() == [SampleSeeds(3).generator(i).random() for i in (1, 2)]
    with pytest.raises(ValueError, match="low >= high"):
        batch.integers(4, 4)
    with pytest.raises(ValueError, match="over 2"):
        batch.integers(0, 2**33)
    with pytest.raises(ValueError, match="low >= high"):
        batch.integers(3, np.array([5, 3]))
    with pytest.raises(ValueError, match="2\\*\\*32 and over"):
        batch.integers(0, np.array([5, 2**33]))


# The batch plan --------------------------------------------------------------------------

_INTERPOLATIONS = (T.InterpolationMode.NEAREST, T.InterpolationMode.BILINEAR)
_PADDING_MODES = st.sampled_from(["constant", "edge", "reflect", "symmetric"])
_FILL = st.one_of(st.integers(0, 255), st.tuples(st.integers(0, 255)))
# RandomCrop's padding: none, one number, (left/right, top/bottom) or (left, top, right, bottom)
PADDINGS = st.one_of(
    st.none(),
    st.integers(0, 5),
    st.tuples(st.integers(0, 4), st.integers(0, 4)),
    st.tuples(*[st.integers(0, 3)] * 4),
)


@st.composite
def pipelines(draw: Any, channels: int) -> list[Any]:
    """A random pipeline of the steps the plan batches, ending in a conversion."""
    steps: list[Any] = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(
            st.sampled_from(
                [
                    *("crop", "hflip", "vflip", "pad", "center", "gray"),
                    *("affine", "rotate", "jitter", "resize"),
                ]
            )
        )
        if kind == "crop":
            padding = draw(PADDINGS)
            fill = (
                draw(_FILL)
                if channels == 1
                else draw(
                    st.one_of(_FILL, st.just((9, 200, 77)[:channels] if channels == 3 else 7))
                )
            )
            steps.append(
                T.RandomCrop(
                    (draw(st.integers(1, 12)), draw(st.integers(1, 12))),
                    padding=padding,
                    pad_if_needed=draw(st.booleans()),
                    fill=fill,
                    padding_mode=draw(_PADDING_MODES),
                )
            )
        elif kind == "hflip":
            steps.append(T.RandomHorizontalFlip(draw(st.sampled_from([0.0, 0.3, 0.5, 1.0]))))
        elif kind == "vflip":
            steps.append(T.RandomVerticalFlip(draw(st.sampled_from([0.0, 0.5, 0.9]))))
        elif kind == "affine" and channels in (1, 3):
            steps.append(
                T.RandomAffine(
                    draw(st.sampled_from([0, 10, (-45, 30), (90, 90)])),
                    translate=draw(st.sampled_from([None, (0.1, 0.1), (0.3, 0.0)])),
                    scale=draw(st.sampled_from([None, (0.8, 1.2), (1e-6, 1e-6)])),
                    shear=draw(st.sampled_from([None, 10, (-5, 5, -8, 8)])),
                    interpolation=draw(st.sampled_from(list(_INTERPOLATIONS))),
                    fill=draw(st.sampled_from([0, 200, (7,)])),
                    center=draw(st.sampled_from([None, (1, 2)])),
                )
            )
        elif kind == "rotate" and channels in (1, 3):
            steps.append(
                T.RandomRotation(
                    draw(st.sampled_from([15, (-180, 180), (90, 90), (0, 0)])),
                    draw(st.sampled_from(list(_INTERPOLATIONS))),
                    center=draw(st.sampled_from([None, (3, 1)])),
                    fill=draw(st.sampled_from([0, 99])),
                )
            )
        elif kind == "resize" and channels in (1, 3):
            steps.append(
                T.Resize(
                    draw(st.sampled_from([5, 11, (7, 16), (14, 3), (2, 2)])),
                    draw(st.sampled_from(list(T.InterpolationMode)[:5])),
                )
            )
        elif kind == "jitter" and channels in (1, 3):
            steps.append(
                T.ColorJitter(
                    draw(st.sampled_from([0, 0.4, (0.5, 2.5)])),
                    draw(st.sampled_from([0, 0.4, (0.0, 3.0)])),
                    draw(st.sampled_from([0, 0.4, (1.0, 1.0), (0.2, 4.0)])),
                    draw(st.sampled_from([0, 0.1, 0.5, (-0.5, -0.3)])),
                )
            )
        elif kind == "gray" and channels in (1, 3):
            steps.append(T.RandomGrayscale(draw(st.sampled_from([0.3, 1.0]))))
        elif kind == "pad":
            steps.append(T.Pad(draw(st.integers(0, 3)), draw(_FILL), draw(_PADDING_MODES)))
        elif kind == "center":
            steps.append(T.CenterCrop((draw(st.integers(1, 14)), draw(st.integers(1, 14)))))
    ending = draw(st.sampled_from(["float", "normalized", "uint8", "float-flip", "v2"]))
    if ending == "uint8":
        steps.append(T.PILToTensor())
    elif ending == "v2":
        steps += [T.PILToTensor(), T.ToDtype(np.float32, scale=draw(st.booleans()))]
    else:
        steps.append(T.ToTensor())
    if ending == "normalized":
        steps.append(
            T.Normalize(
                MEAN[:1] * channels if channels != 3 else MEAN,
                STD[:channels] if channels == 3 else STD[:1],
            )
        )
    if ending == "float-flip":
        steps.append(T.RandomHorizontalFlip())
    if draw(st.booleans()):
        value = draw(
            st.sampled_from([0, 0.5, (0.1,), (1, 2, 3)[:channels] if channels == 3 else 7])
        )
        scale = draw(st.sampled_from([(0.02, 0.33), (0.3, 0.9), (0.9, 1.0)]))
        steps.append(T.RandomErasing(draw(st.sampled_from([0.5, 1.0])), scale, value=value))
    return steps


def random_images(data: Any, smallest: int) -> tuple[int, np.ndarray]:
    """Nine random 8-bit images of 1, 3 or 4 channels and sides of ``smallest`` to 12:
    (channels, pixels), the pixels (9, H, W) or (9, H, W, C)."""
    channels = data.draw(st.sampled_from([1, 3, 4]), label="channels")
    height, width = data.draw(st.integers(smallest, 12)), data.draw(st.integers(smallest, 12))
    shape = (9, height, width) if channels == 1 else (9, height, width, channels)
    pixels = np.random.default_rng(data.draw(st.integers(0, 99))).integers(0, 256, shape, np.uint8)
    return channels, pixels


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_batch_is_the_per_sample_path_bit_for_bit(data) -> None:
    channels, pixels = random_images(data, 3)
    steps = data.draw(pipelines(channels), label="steps")
    dataset = InMemory(pixels, T.Compose(steps))
    indices = data.draw(st.lists(st.integers(0, 8), min_size=1, max_size=16), label="indices")
    seed = data.draw(st.integers(0, 2**63 - 1), label="seed")
    reason = plan_for(dataset.transform).why_per_sample(pixels.shape[1:])
    try:
        expected = per_sample(dataset, indices, seed)
    except ValueError:  # a crop larger than the image: the per-sample path's error
        assert reason is not None
        assert "larger than" in reason
        with pytest.raises(ValueError, match="larger than input image"):
            batched(dataset, indices, seed)
        return
    assert reason is None, reason
    assert_same_bits(batched(dataset, indices, seed), expected)


def cifar_like(count: int = 40) -> np.ndarray:
    return np.random.default_rng(7).integers(0, 256, (count, 32, 32, 3), np.uint8)


def cifar_recipe() -> T.Compose:
    return T.Compose(
        [
            T.RandomCrop(32, padding=4),
            T.RandomHorizontalFlip(),
            T.ToTensor(),
            T.Normalize(MEAN, STD),
        ]
    )


def test_the_cifar_and_mnist_recipes_run_batched_with_each_samples_draws() -> None:
    cifar = InMemory(cifar_like(), cifar_recipe())
    assert explain(cifar.transform, (32, 32, 3)).startswith("batched")
    indices = [3, 17, 3, 39, 0, 21, 8, 8, 30]
    batch = batched(cifar, indices, 1234)
    assert batch.shape == (9, 3, 32, 32)
    assert batch.dtype == np.float32
    assert_same_bits(batch, per_sample(cifar, indices, 1234))
    # Each sample's own draws: the same index twice in a batch is the same image.
    assert_same_bits(batch[0], batch[2])
    assert not np.array_equal(batch[0], batched(cifar, indices, 99)[0])
    digits = np.random.default_rng(8).integers(0, 256, (30, 28, 28), np.uint8)
    mnist = InMemory(digits, T.Compose([T.ToTensor(), T.Normalize((0.1307,), (0.3081,))]))
    assert_same_bits(batched(mnist, [5, 2, 29], 1), per_sample(mnist, [5, 2, 29], 1))


def test_a_step_without_a_batch_form_sends_the_pipeline_to_the_per_sample_path() -> None:
    steps = [T.RandomCrop(32, padding=4), T.Lambda(lambda image: image), T.ToTensor()]
    dataset = InMemory(cifar_like(), T.Compose(steps))
    said = explain(dataset.transform)
    assert said.startswith("per sample: step 1 (Lambda(")
    assert "Lambda has no batch form" in said
    assert plan_for(dataset.transform).stack_plan((32, 32, 3)) is None
    batch = dataset.__getitems__([1, 2], SampleRngs(SampleSeeds(5), [1, 2]))
    assert isinstance(batch, list)  # the per-sample path's samples, collated later
    assert_same_bits(np.stack([image for image, _ in batch]), per_sample(dataset, [1, 2], 5))


@pytest.mark.parametrize(
    ("steps", "shape", "why"),
    [
        ([T.Resize(8, T.InterpolationMode.LANCZOS), T.ToTensor()], (32, 32, 3), "lanczos"),
        ([T.Resize(8), T.ToTensor()], (32, 32, 4), "only grey and RGB"),
        ([T.Resize(8, max_size=8), T.ToTensor()], (32, 32, 3), "max_size = 8"),
        ([T.Lambda(str), T.ToTensor()], (32, 32, 3), "Lambda has no batch form"),
        ([T.RandomCrop(40), T.ToTensor()], (32, 32, 3), "larger than the (padded) image"),
        ([T.RandomHorizontalFlip()], (32, 32, 3), "does not convert the images"),
        ([T.Normalize(MEAN, STD), T.ToTensor()], (32, 32, 3), "Normalize of a PIL image"),
        ([T.PILToTensor(), T.Normalize(MEAN, STD)], (32, 32, 3), "Normalize of a uint8"),
        ([T.ToTensor(), T.CenterCrop(3)], (32, 32, 3), "after the conversion"),
        ([T.Pad(2, fill=(1, 2)), T.ToTensor()], (32, 32, 3), "fill (1, 2)"),
        ([T.Pad(2, fill=300), T.ToTensor()], (32, 32, 3), "not 8-bit"),
        ([T.Pad(-1), T.ToTensor()], (32, 32, 3), "negative padding"),
        ([T.Pad(1, padding_mode="wrap"), T.ToTensor()], (32, 32, 3), "padding_mode 'wrap'"),
        ([T.ToTensor()], (32, 32, 5), "not 8-bit PIL images"),
        ([T.RandomGrayscale(), T.ToTensor()], (32, 32, 4), "4-channel images"),
        ([T.ToTensor(), T.RandomErasing(value="random")], (32, 32, 3), "normal noise"),
        ([T.ToTensor(), T.RandomErasing(value=(1, 2))], (32, 32, 3), "single value or 3"),
        ([T.PILToTensor(), T.ToDtype(np.float64)], (32, 32, 3), "only float32"),
        ([T.ToTensor(), T.RandomGrayscale()], (32, 32, 3), "after the conversion"),
        ([T.RandomAffine(5), T.ToTensor()], (32, 32, 4), "only grey and RGB"),
        ([T.ColorJitter(0.4), T.ToTensor()], (8, 8, 2), "only grey and RGB"),
        ([T.RandomRotation(5, T.InterpolationMode.BICUBIC), T.ToTensor()], (8, 8), "bicubic"),
        ([T.RandomRotation(5, expand=True), T.ToTensor()], (8, 8), "different sizes"),
        ([T.RandomRotation(5, fill=(1, 2)), T.ToTensor()], (8, 8, 3), "fill (1, 2)"),
        ([T.RandomRotation(5, fill=300), T.ToTensor()], (8, 8, 3), "not 8-bit"),
        ([str.upper, T.ToTensor()], (32, 32, 3), "not a flowloader transform"),
    ],
)
def test_the_plan_says_which_step_runs_per_sample_and_why(steps, shape, why) -> None:
    reason = compile_stack(steps, shape)
    assert isinstance(reason, str)
    assert why in reason
    assert explain(T.Compose(steps), shape) == f"per sample: {reason}"


def test_generators_handed_in_and_a_steps_own_generator_draw_in_sample_order() -> None:
    pixels = cifar_like(6)
    plan = plan_for(
        T.Compose([T.RandomCrop(24, padding=2), T.RandomHorizontalFlip(), T.PILToTensor()])
    )
    rngs = [np.random.default_rng(50 + k) for k in range(6)]
    batch = plan.apply_to_stack(pixels.copy(), rngs, np.empty)
    rngs = [np.random.default_rng(50 + k) for k in range(6)]
    from PIL import Image

    expected = np.stack(
        [plan.apply(Image.fromarray(p), r) for p, r in zip(pixels, rngs, strict=True)]
    )
    assert_same_bits(batch, expected)
    shared = np.random.default_rng(3)
    steps = [T.RandomCrop(20, rng=shared), T.RandomVerticalFlip(), T.ToTensor()]
    dataset = InMemory(pixels, T.Compose(steps))
    indices = [4, 1, 1, 5]
    batch = batched(dataset, indices, 77)
    shared.bit_generator.state = np.random.default_rng(3).bit_generator.state
    assert_same_bits(batch, per_sample(dataset, indices, 77))


def test_apply_to_stack_refuses_what_it_cannot_batch() -> None:
    plan = plan_for(T.Compose([T.Lambda(str), T.ToTensor()]))
    with pytest.raises(ValueError, match="not batched: step 0"):
        plan.apply_to_stack(cifar_like(2), None, np.empty)


def test_the_batch_is_written_into_the_array_allocate_gives() -> None:
    given: list[np.ndarray] = []

    def allocate(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        given.append(np.zeros(shape, dtype))
        return given[-1]

    dataset = InMemory(cifar_like(), cifar_recipe())
    batch = dataset.__getitems__([1, 2, 3], SampleRngs(SampleSeeds(1), [1, 2, 3]), allocate)
    assert batch.columns[0] is given[0]
    assert batch.columns[1].tolist() == [1, 2, 3]


class PerSample(InMemory):
    """The same dataset loaded one sample at a time: a subclass that overrides
    ``__getitem__`` is (flowloader.batching.overrides_getitem)."""

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        return super().__getitem__(index)


@pytest.mark.parametrize(
    ("num_workers", "worker_method"),
    [(0, "multiprocessing"), (2, "thread"), (2, "multiprocessing")],
)
def test_a_loaders_batches_are_the_same_for_any_workers(num_workers, worker_method) -> None:
    import flowloader as fl

    pixels = cifar_like(30)

    def epochs(dataset: ArrayImageDataset, workers: int) -> list[np.ndarray]:
        loader = fl.DataLoader(
            dataset,
            batch_size=7,
            shuffle=True,
            num_workers=workers,
            worker_method=worker_method,
            generator=np.random.default_rng(11),
        )
        return [images for images, _ in loader]

    batched_epoch = epochs(InMemory(pixels, cifar_recipe()), num_workers)
    one_by_one = epochs(PerSample(pixels, cifar_recipe()), 0)
    assert len(batched_epoch) == len(one_by_one) == 5
    for got, expected in zip(batched_epoch, one_by_one, strict=True):
        assert_same_bits(np.asarray(got), np.asarray(expected))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_mixup_at_collate_is_the_same_for_any_num_workers(num_workers) -> None:
    import flowloader as fl

    def epoch(workers: int) -> list[tuple[np.ndarray, np.ndarray]]:
        loader = fl.DataLoader(
            InMemory(cifar_like(24), cifar_recipe()),
            batch_size=8,
            shuffle=True,
            num_workers=workers,
            worker_method="thread",
            generator=np.random.default_rng(5),
            collate_fn=T.MixUp(num_classes=10).collate,
        )
        return [(np.asarray(images), np.asarray(labels)) for images, labels in loader]

    np.random.seed(1)  # the batch's own generator, not NumPy's global one
    expected = epoch(0)
    assert expected[0][1].shape == (8, 10)
    np.random.seed(2)
    for (images, labels), (want_images, want_labels) in zip(
        epoch(num_workers), expected, strict=True
    ):
        assert_same_bits(images, want_images)
        assert_same_bits(labels, want_labels)
