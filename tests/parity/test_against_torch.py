"""The same inputs through flowloader and torch.utils.data: lengths, batches, dtypes, errors."""

from __future__ import annotations

import collections
import inspect
from typing import NamedTuple

import numpy as np
import pytest

import flowloader as fl
import flowloader.utils.data

from .helpers import assert_same_tree, raised, to_numpy_tree

torch = pytest.importorskip("torch")
tud = torch.utils.data

pytestmark = pytest.mark.torch


class Pair(NamedTuple):
    image: np.ndarray
    label: int


def make_map_dataset(base):
    class Samples(base.Dataset):
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            return self.sample(i)

        @staticmethod
        def sample(i):
            return {
                "image": np.full((2, 3), i, dtype=np.float32),
                "label": i,
                "weight": i / 2,
                "flag": i % 2 == 0,
                "name": f"s{i}",
                "nested": (np.int16(i), [np.uint8(i), 1.5]),
                "pair": Pair(np.arange(2, dtype=np.int32) + i, i),
                "ordered": collections.OrderedDict(z=i, a=np.float64(i)),
            }

    return Samples


def make_stream(base):
    class Stream(base.IterableDataset):
        def __init__(self, n, reported=None):
            self.n, self.reported = n, reported

        def __iter__(self):
            return iter(range(self.n))

        def __len__(self):
            return self.reported

    return Stream


OURS, THEIRS = make_map_dataset(fl), make_map_dataset(tud)
OUR_STREAM, THEIR_STREAM = make_stream(fl), make_stream(tud)

LOADER_CONFIGS = [
    {},
    {"batch_size": 4},
    {"batch_size": 4, "drop_last": True},
    {"batch_size": 3, "sampler": [5, 1, 9, 2]},
    {"batch_sampler": [[0, 1], [7], [3, 4, 5]]},
    {"batch_size": None},
    {"batch_size": None, "sampler": [3, 0]},
    {"batch_size": 16},
]


@pytest.mark.parametrize("config", LOADER_CONFIGS, ids=str)
def test_batches_match(config) -> None:
    ours = fl.DataLoader(OURS(10), **config)
    theirs = tud.DataLoader(THEIRS(10), **config)
    assert len(ours) == len(theirs)
    our_batches = list(ours)
    their_batches = [to_numpy_tree(b) for b in theirs]
    assert len(our_batches) == len(their_batches)
    for i, (a, b) in enumerate(zip(our_batches, their_batches, strict=True)):
        assert_same_tree(a, b, f"batch {i}")


@pytest.mark.parametrize(
    ("n", "reported", "config"),
    [
        (7, 7, {"batch_size": 3}),
        (7, 7, {"batch_size": 3, "drop_last": True}),
        (7, 7, {"batch_size": None}),
        (6, 6, {"batch_size": 2, "drop_last": True}),
    ],
)
def test_iterable_batches_and_len_match(n, reported, config) -> None:
    ours = fl.DataLoader(OUR_STREAM(n, reported), **config)
    theirs = tud.DataLoader(THEIR_STREAM(n, reported), **config)
    assert len(ours) == len(theirs)
    for a, b in zip(list(ours), [to_numpy_tree(x) for x in theirs], strict=True):
        assert_same_tree(a, b)


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize(
    ("n", "bs", "drop_last"), [(10, 3, False), (10, 3, True), (9, 3, True), (1, 4, False)]
)
def test_len_and_batch_sizes_match_with_shuffle(n, bs, drop_last, shuffle) -> None:
    ours = fl.DataLoader(range(n), batch_size=bs, drop_last=drop_last, shuffle=shuffle)
    theirs = tud.DataLoader(range(n), batch_size=bs, drop_last=drop_last, shuffle=shuffle)
    assert len(ours) == len(theirs)
    assert [len(b) for b in ours] == [len(b) for b in theirs]


SAMPLE_BATCHES = [
    [1, 2, 3],
    [1.0, 2.5],
    [True, False],
    [1, 2.5],
    [np.float32(1), np.float32(2)],
    [np.int8(1), np.int8(2)],
    [np.bool_(True), np.bool_(False)],
    ["a", "b"],
    [b"a", b"b"],
    [np.zeros((2, 2), np.uint8), np.ones((2, 2), np.uint8)],
    [(1, "x"), (2, "y")],
    [[1, 2], [3, 4]],
    [{"a": 1, "b": [1.0, 2.0]}, {"a": 2, "b": [3.0, 4.0]}],
    [Pair(np.zeros(2), 1), Pair(np.ones(2), 2)],
    [collections.OrderedDict(b=1, a=2)] * 2,
    [collections.defaultdict(int, {"k": 3})] * 2,
]


@pytest.mark.parametrize("batch", SAMPLE_BATCHES, ids=repr)
def test_default_collate_matches(batch) -> None:
    assert_same_tree(fl.default_collate(batch), to_numpy_tree(tud.default_collate(batch)))


@pytest.mark.parametrize(
    "sample",
    [
        np.float32(2),
        5,
        "s",
        (np.int64(1), 2),
        [np.int8(3)],
        {"a": np.float64(1)},
        Pair(np.zeros(1), 2),
    ],
    ids=repr,
)
def test_default_convert_matches(sample) -> None:
    assert_same_tree(fl.default_convert(sample), to_numpy_tree(tud.default_convert(sample)))


COLLATE_ERRORS = [
    [np.zeros(2), np.zeros(3)],
    [[1, 2], [1, 2, 3]],
    [None, None],
    [object(), object()],
    [np.array(["a"]), np.array(["b"])],
    [{"a": 1}, {"b": 1}],
]


@pytest.mark.parametrize("batch", COLLATE_ERRORS, ids=repr)
def test_default_collate_errors_match(batch) -> None:
    theirs = raised(lambda: tud.default_collate(batch))
    assert issubclass(raised(lambda: fl.default_collate(batch)), theirs)


class _Stream(tud.IterableDataset):
    def __iter__(self):
        return iter(range(3))


class _OurStream(fl.IterableDataset):
    def __iter__(self):
        return iter(range(3))


# The same mistakes must raise the same exception types in both libraries.
CONSTRUCTOR_ERRORS = [
    (False, {"num_workers": -1}),
    (False, {"timeout": -1}),
    (False, {"prefetch_factor": 2}),
    (False, {"num_workers": 2, "prefetch_factor": -1}),
    (False, {"persistent_workers": True}),
    (False, {"multiprocessing_context": "fork"}),
    (False, {"num_workers": 1, "multiprocessing_context": "bogus"}),
    (False, {"num_workers": 1, "multiprocessing_context": 3}),
    (True, {"shuffle": True}),
    (True, {"sampler": [0, 1]}),
    (True, {"batch_sampler": [[0]]}),
    (False, {"shuffle": True, "sampler": [0, 1]}),
    (False, {"batch_sampler": [[0]], "batch_size": 2}),
    (False, {"batch_sampler": [[0]], "shuffle": True}),
    (False, {"batch_sampler": [[0]], "sampler": [0]}),
    (False, {"batch_sampler": [[0]], "drop_last": True}),
    (False, {"batch_size": None, "drop_last": True}),
    (False, {"batch_size": 0}),
    (False, {"batch_size": -2}),
    (False, {"batch_size": 2.5}),
    (False, {"drop_last": "yes"}),
]


@pytest.mark.parametrize(("iterable", "kwargs"), CONSTRUCTOR_ERRORS, ids=str)
def test_constructor_errors_match(iterable, kwargs) -> None:
    theirs = raised(lambda: tud.DataLoader(_Stream() if iterable else list(range(10)), **kwargs))
    ours = raised(lambda: fl.DataLoader(_OurStream() if iterable else list(range(10)), **kwargs))
    assert ours is theirs


def test_empty_dataset_with_shuffle_error_matches() -> None:
    assert raised(lambda: fl.DataLoader([], shuffle=True)) is raised(
        lambda: tud.DataLoader([], shuffle=True)
    )


def test_frozen_attribute_error_matches() -> None:
    theirs, ours = tud.DataLoader(range(3)), fl.DataLoader(range(3))
    with pytest.raises(ValueError, match="should not be set") as their_error:
        theirs.batch_size = 2
    with pytest.raises(ValueError, match="should not be set") as our_error:
        ours.batch_size = 2
    assert str(our_error.value) == str(their_error.value)


def test_timeout_without_workers_error_matches() -> None:
    with pytest.raises(AssertionError):
        iter(tud.DataLoader(range(3), timeout=1))
    with pytest.raises(AssertionError):
        iter(fl.DataLoader(range(3), timeout=1))


@pytest.mark.parametrize(
    "name",
    [
        "DataLoader",
        "RandomSampler",
        "WeightedRandomSampler",
        "SubsetRandomSampler",
        "BatchSampler",
        "SequentialSampler",
        "DistributedSampler",
        "random_split",
        "Subset",
        "ConcatDataset",
        "StackDataset",
        "ChainDataset",
        "TensorDataset",
    ],
)
def test_signatures_match(name) -> None:
    def shape(obj):
        return [
            (p.name, p.kind, p.default)
            for p in inspect.signature(obj).parameters.values()
            if p.name != "generator" or name != "random_split"
        ]

    ours, theirs = shape(getattr(fl, name)), shape(getattr(tud, name))
    assert ours[: len(theirs)] == theirs
    # Our additions come after PyTorch's parameters and are keyword-only.
    assert all(kind == inspect.Parameter.KEYWORD_ONLY for _, kind, _ in ours[len(theirs) :])


def test_public_names_cover_torch() -> None:
    datapipe_names = {
        "DFIterDataPipe",
        "DataChunk",
        "IterDataPipe",
        "MapDataPipe",
        "_DatasetKind",
        "argument_validation",
        "functional_datapipe",
        "guaranteed_datapipes_determinism",
        "non_deterministic",
        "runtime_validation",
        "runtime_validation_disabled",
    }
    assert set(tud.__all__) - datapipe_names <= set(fl.utils.data.__all__)


@pytest.mark.parametrize(("n", "bs", "drop_last"), [(10, 3, False), (10, 3, True), (0, 2, False)])
def test_batch_sampler_matches(n, bs, drop_last) -> None:
    assert list(fl.BatchSampler(range(n), bs, drop_last)) == list(
        tud.BatchSampler(range(n), bs, drop_last)
    )
    assert len(fl.BatchSampler(range(n), bs, drop_last)) == len(
        tud.BatchSampler(range(n), bs, drop_last)
    )


@pytest.mark.parametrize(
    ("n", "world", "drop_last"), [(10, 3, False), (10, 3, True), (2, 5, False), (12, 4, False)]
)
def test_distributed_sampler_matches_without_shuffle(n, world, drop_last) -> None:
    for rank in range(world):
        ours = fl.DistributedSampler(range(n), world, rank, shuffle=False, drop_last=drop_last)
        theirs = tud.DistributedSampler(range(n), world, rank, shuffle=False, drop_last=drop_last)
        assert list(ours) == list(theirs)
        assert len(ours) == len(theirs)


@pytest.mark.parametrize(
    ("n", "world", "drop_last"), [(10, 3, False), (10, 3, True), (2, 5, False)]
)
def test_distributed_sampler_shuffled_shard_sizes_match(n, world, drop_last) -> None:
    ours = [
        list(fl.DistributedSampler(range(n), world, r, drop_last=drop_last)) for r in range(world)
    ]
    theirs = [
        list(tud.DistributedSampler(range(n), world, r, drop_last=drop_last)) for r in range(world)
    ]
    assert [len(p) for p in ours] == [len(p) for p in theirs]


@pytest.mark.parametrize("lengths", [[3, 7], [0.3, 0.3, 0.4], [0.5, 0.5], [0.1, 0.9], [1.0]])
def test_random_split_lengths_match(lengths) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = fl.random_split(range(10), lengths, generator=0)
        theirs = tud.random_split(range(10), lengths, generator=torch.Generator().manual_seed(0))
    assert [len(p) for p in ours] == [len(p) for p in theirs]


@pytest.mark.parametrize("kwargs", [{"num_samples": 0}, {"replacement": 1}, {"num_samples": -1}])
def test_random_sampler_errors_match(kwargs) -> None:
    theirs = raised(lambda: tud.RandomSampler(range(5), **kwargs))
    assert raised(lambda: fl.RandomSampler(range(5), **kwargs)) is theirs


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [(([1, 2], 0), {}), (([1, 2], 3), {"replacement": "yes"}), (([[1, 2], [3, 4]], 3), {})],
)
def test_weighted_sampler_errors_match(args, kwargs) -> None:
    theirs = raised(lambda: tud.WeightedRandomSampler(*args, **kwargs))
    assert raised(lambda: fl.WeightedRandomSampler(*args, **kwargs)) is theirs


@pytest.mark.parametrize(
    ("weights", "n", "replacement"),
    [
        ([1, 0, 0], 4, False),
        ([-1, 2], 1, True),
        ([0.0, 0.0], 1, True),
        ([float("nan"), 1], 1, True),
    ],
)
def test_weighted_sampler_runtime_errors_match(weights, n, replacement) -> None:
    with pytest.raises(RuntimeError):
        list(tud.WeightedRandomSampler(weights, n, replacement=replacement))
    with pytest.raises(RuntimeError):
        list(fl.WeightedRandomSampler(weights, n, replacement=replacement))


def test_weighted_sampler_without_replacement_uses_zero_weights_last_like_torch() -> None:
    ours = list(fl.WeightedRandomSampler([0, 0, 5], 3, replacement=False))
    theirs = list(tud.WeightedRandomSampler([0, 0, 5], 3, replacement=False))
    assert ours[0] == theirs[0] == 2
    assert sorted(ours) == sorted(theirs) == [0, 1, 2]


def test_dataset_errors_match() -> None:
    with pytest.raises(AssertionError):
        tud.ConcatDataset([])
    with pytest.raises(AssertionError):
        fl.ConcatDataset([])
    with pytest.raises(AssertionError):
        tud.TensorDataset(torch.zeros(2), torch.zeros(3))
    with pytest.raises(AssertionError):
        fl.TensorDataset(np.zeros(2), np.zeros(3))
    with pytest.raises(AssertionError):
        tud.ConcatDataset([_Stream()])
    with pytest.raises(AssertionError):
        fl.ConcatDataset([_OurStream()])


def test_concat_dataset_indexing_matches() -> None:
    ours = fl.ConcatDataset([list(range(3)), list(range(10, 12))])
    theirs = tud.ConcatDataset([list(range(3)), list(range(10, 12))])
    assert [ours[i] for i in range(-5, 5)] == [theirs[i] for i in range(-5, 5)]
    for bad in (-6, 5):
        assert issubclass(raised(lambda i=bad: ours[i]), raised(lambda i=bad: theirs[i]))
