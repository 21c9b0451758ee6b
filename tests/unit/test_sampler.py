from __future__ import annotations

import itertools

import numpy as np
import pytest

import flowloader as fl


def test_sequential_sampler() -> None:
    sampler = fl.SequentialSampler(range(5))
    assert list(sampler) == [0, 1, 2, 3, 4]
    assert len(sampler) == 5


def test_sampler_base_warns_about_unused_data_source_and_needs_iter() -> None:
    with pytest.warns(UserWarning, match="data_source"):
        sampler = fl.Sampler(range(3))
    with pytest.raises(NotImplementedError):
        iter(sampler)


def test_random_sampler_is_a_permutation() -> None:
    sampler = fl.RandomSampler(range(50), generator=0)
    order = list(sampler)
    assert sorted(order) == list(range(50))
    assert order != list(range(50))
    assert len(sampler) == 50
    assert all(type(i) is int for i in order)


def test_random_sampler_seeded_is_reproducible_and_epochs_differ() -> None:
    first, second = (
        fl.RandomSampler(range(30), generator=7),
        fl.RandomSampler(range(30), generator=7),
    )
    epochs_a = [list(first) for _ in range(3)]
    epochs_b = [list(second) for _ in range(3)]
    assert epochs_a == epochs_b
    assert epochs_a[0] != epochs_a[1]


def test_random_sampler_unseeded_follows_numpy_global_seed() -> None:
    np.random.seed(123)
    a = list(fl.RandomSampler(range(30)))
    np.random.seed(123)
    b = list(fl.RandomSampler(range(30)))
    assert a == b
    assert list(fl.RandomSampler(range(30))) != a  # fresh order on the next epoch


def test_random_sampler_more_samples_than_items_concatenates_permutations() -> None:
    order = list(fl.RandomSampler(range(4), num_samples=10, generator=0))
    assert len(order) == 10
    assert sorted(order[:4]) == [0, 1, 2, 3]
    assert sorted(order[4:8]) == [0, 1, 2, 3]
    assert len(set(order[8:])) == 2


def test_random_sampler_with_replacement() -> None:
    sampler = fl.RandomSampler(range(3), replacement=True, num_samples=100_000, generator=0)
    order = np.fromiter(sampler, dtype=np.int64)
    assert len(order) == len(sampler) == 100_000
    assert set(np.unique(order)) == {0, 1, 2}
    assert np.allclose(np.bincount(order) / len(order), 1 / 3, atol=0.01)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"replacement": 1}, TypeError, "replacement"),
        ({"num_samples": 0}, ValueError, "num_samples"),
        ({"num_samples": -3}, ValueError, "num_samples"),
        ({"num_samples": 2.5}, ValueError, "num_samples"),
        ({"generator": "x"}, TypeError, "generator"),
        ({"generator": -1}, ValueError, "non-negative"),
    ],
)
def test_random_sampler_argument_errors(kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        fl.RandomSampler(range(5), **kwargs)


def test_random_sampler_on_empty_dataset() -> None:
    with pytest.raises(ValueError, match="empty"):
        fl.RandomSampler([])
    with pytest.raises(ValueError, match="empty"):
        list(fl.RandomSampler([], num_samples=3))


@pytest.mark.torch
def test_random_sampler_accepts_a_torch_generator() -> None:
    import torch

    a = list(fl.RandomSampler(range(20), generator=torch.Generator().manual_seed(3)))
    b = list(fl.RandomSampler(range(20), generator=torch.Generator().manual_seed(3)))
    assert a == b
    assert sorted(a) == list(range(20))


def test_subset_random_sampler() -> None:
    sampler = fl.SubsetRandomSampler([10, 20, 30, 40], generator=1)
    order = list(sampler)
    assert sorted(order) == [10, 20, 30, 40]
    assert len(sampler) == 4
    assert list(fl.SubsetRandomSampler([10, 20, 30, 40], generator=1)) == order


def test_weighted_random_sampler_follows_weights() -> None:
    sampler = fl.WeightedRandomSampler([0.0, 1.0, 3.0], 40_000, generator=0)
    order = np.fromiter(sampler, dtype=np.int64)
    assert len(sampler) == 40_000
    counts = np.bincount(order, minlength=3) / len(order)
    assert counts[0] == 0
    assert abs(counts[2] - 0.75) < 0.01


def test_weighted_random_sampler_without_replacement() -> None:
    order = list(fl.WeightedRandomSampler([1, 1, 1, 0, 5], 4, replacement=False, generator=0))
    assert sorted(order) == [0, 1, 2, 4]
    # Once the positive weights are used up, zero-weight indices follow (torch.multinomial).
    assert next(iter(fl.WeightedRandomSampler([1, 0, 0], 3, replacement=False))) == 0
    with pytest.raises(RuntimeError, match="without replacement"):
        list(fl.WeightedRandomSampler([1, 0, 0], 4, replacement=False))


def test_weighted_random_sampler_without_replacement_prefers_heavy_indices() -> None:
    firsts = [
        next(iter(fl.WeightedRandomSampler([1, 9], 2, replacement=False, generator=s)))
        for s in range(2000)
    ]
    assert abs(np.mean(np.array(firsts) == 1) - 0.9) < 0.03


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (([1, 2], 0), {}, ValueError, "num_samples"),
        (([1, 2], True), {}, ValueError, "num_samples"),
        (([1, 2], 3), {"replacement": "yes"}, ValueError, "replacement"),
        (([[1, 2], [3, 4]], 3), {}, ValueError, r"1d sequence.*\(2, 2\)"),
    ],
)
def test_weighted_random_sampler_argument_errors(args, kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        fl.WeightedRandomSampler(*args, **kwargs)


@pytest.mark.parametrize("weights", [[-1.0, 2.0], [0.0, 0.0], [np.nan, 1.0]])
def test_weighted_random_sampler_invalid_weights_fail_on_iteration(weights) -> None:
    with pytest.raises(RuntimeError, match="WeightedRandomSampler"):
        list(fl.WeightedRandomSampler(weights, 2))


@pytest.mark.parametrize(
    ("n", "batch_size", "drop_last", "expected"),
    [
        (10, 3, False, [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]),
        (10, 3, True, [[0, 1, 2], [3, 4, 5], [6, 7, 8]]),
        (6, 3, True, [[0, 1, 2], [3, 4, 5]]),
        (2, 5, True, []),
        (0, 2, False, []),
    ],
)
def test_batch_sampler(n, batch_size, drop_last, expected) -> None:
    sampler = fl.BatchSampler(fl.SequentialSampler(range(n)), batch_size, drop_last)
    assert list(sampler) == expected
    assert len(sampler) == len(expected)


def test_batch_sampler_takes_any_iterable() -> None:
    assert list(fl.BatchSampler(iter("abcde"), 2, False)) == [["a", "b"], ["c", "d"], ["e"]]


@pytest.mark.parametrize(
    ("batch_size", "drop_last", "match"),
    [
        (0, False, "batch_size"),
        (True, False, "batch_size"),
        (2.0, False, "batch_size"),
        (2, 1, "drop_last"),
    ],
)
def test_batch_sampler_argument_errors(batch_size, drop_last, match) -> None:
    with pytest.raises(ValueError, match=match):
        fl.BatchSampler(range(4), batch_size, drop_last)


# BatchSampler cuts its batches from the lists its sampler draws (flowloader's own
# samplers): exactly the batches of one index at a time, with the draws at the same points.


def grouped_one_at_a_time(sampler, batch_size: int, drop_last: bool) -> list[list[int]]:
    indices, batches = iter(sampler), []
    while batch := list(itertools.islice(indices, batch_size)):
        if drop_last and len(batch) < batch_size:
            break
        batches.append(batch)
    return batches


def make_samplers(n: int, seed: int) -> dict[str, fl.Sampler]:
    return {
        "sequential": fl.SequentialSampler(range(n)),
        "random": fl.RandomSampler(range(n), generator=seed),
        "random, more than n": fl.RandomSampler(range(n), num_samples=2 * n + 3, generator=seed),
        "random, fewer than n": fl.RandomSampler(
            range(n), num_samples=max(n // 2, 1), generator=seed
        ),
        "replacement": fl.RandomSampler(
            range(n), replacement=True, num_samples=n + 5, generator=seed
        ),
        "subset": fl.SubsetRandomSampler(list(range(0, 3 * n, 3)), generator=seed),
        "subset of an array": fl.SubsetRandomSampler(np.arange(n) * 2, generator=seed),
        "weighted": fl.WeightedRandomSampler(np.arange(1, n + 1), n, generator=seed),
        "weighted, no replacement": fl.WeightedRandomSampler(
            np.arange(1, n + 1), n, replacement=False, generator=seed
        ),
    }


@pytest.mark.parametrize("kind", list(make_samplers(1, 0)))
@pytest.mark.parametrize("n", [1, 7, 64, 130])
@pytest.mark.parametrize("batch_size", [1, 3, 64, 200])
@pytest.mark.parametrize("drop_last", [False, True])
def test_batches_cut_from_the_drawn_lists_are_the_batches_of_one_index_at_a_time(
    kind, n, batch_size, drop_last
) -> None:
    got = list(fl.BatchSampler(make_samplers(n, 5)[kind], batch_size, drop_last))
    want = grouped_one_at_a_time(make_samplers(n, 5)[kind], batch_size, drop_last)
    assert got == want
    assert all(type(batch) is list for batch in got)
    assert [type(i) for batch in got for i in batch] == [type(i) for b in want for i in b]


def test_a_long_order_is_cut_across_its_chunks(monkeypatch) -> None:
    monkeypatch.setattr(fl.sampler, "_DRAW_CHUNK", 10)
    makers = (
        lambda: fl.SequentialSampler(range(95)),
        lambda: fl.RandomSampler(range(9), replacement=True, num_samples=95, generator=1),
        lambda: fl.RandomSampler(range(10), num_samples=95, generator=1),
    )
    for make in makers:
        for batch_size in (3, 10, 40):
            got = list(fl.BatchSampler(make(), batch_size, False))
            assert got == grouped_one_at_a_time(make(), batch_size, False)
            assert sum(map(len, got)) == 95


def test_later_permutations_are_drawn_when_a_batch_first_needs_them() -> None:
    # The global generator is shared with the loop: its draws must fall where they fell.
    def draws_between(batch_sampler) -> list[float]:
        np.random.seed(3)
        seen = []
        for _ in batch_sampler:
            seen.append(np.random.random())
        return seen

    sampler = fl.RandomSampler(range(8), num_samples=24)
    got = draws_between(fl.BatchSampler(sampler, 4, False))

    class OneAtATime(fl.Sampler):
        def __iter__(self):
            return iter(sampler)

    assert got == draws_between(fl.BatchSampler(OneAtATime(), 4, False))


def test_a_subclass_s_own_iter_is_grouped_one_index_at_a_time() -> None:
    class Evens(fl.RandomSampler):
        def __iter__(self):
            return (2 * i for i in super().__iter__())

    batches = list(fl.BatchSampler(Evens(range(10), generator=2), 4, False))
    assert sorted(i for batch in batches for i in batch) == list(range(0, 20, 2))
