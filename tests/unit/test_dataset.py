from __future__ import annotations

import typing

import numpy as np
import pytest

import flowloader as fl


class Squares(fl.Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __getitem__(self, i: int) -> int:
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i * i

    def __len__(self) -> int:
        return self.n


class Count(fl.IterableDataset):
    def __init__(self, start: int, stop: int) -> None:
        self.start, self.stop = start, stop

    def __iter__(self):
        return iter(range(self.start, self.stop))

    def __len__(self) -> int:
        return self.stop - self.start


def test_base_dataset_needs_getitem() -> None:
    with pytest.raises(NotImplementedError, match="__getitem__"):
        fl.Dataset()[0]


def test_base_iterable_dataset_needs_iter() -> None:
    with pytest.raises(NotImplementedError, match="__iter__"):
        iter(fl.IterableDataset())


def test_adding_map_datasets_concatenates() -> None:
    joined = Squares(3) + Squares(2)
    assert isinstance(joined, fl.ConcatDataset)
    assert [joined[i] for i in range(len(joined))] == [0, 1, 4, 0, 1]


def test_adding_iterable_datasets_chains() -> None:
    chained = Count(0, 2) + Count(5, 7)
    assert isinstance(chained, fl.ChainDataset)
    assert list(chained) == [0, 1, 5, 6]
    assert len(chained) == 4


def test_tensor_dataset_indexes_every_array() -> None:
    x = np.arange(12).reshape(4, 3)
    y = np.array([0, 1, 0, 1])
    ds = fl.TensorDataset(x, y)
    assert len(ds) == 4
    sample = ds[2]
    assert isinstance(sample, tuple)
    np.testing.assert_array_equal(sample[0], [6, 7, 8])
    assert sample[1] == 0


def test_tensor_dataset_size_mismatch_names_sizes() -> None:
    with pytest.raises(AssertionError, match=r"\[4, 3\]"):
        fl.TensorDataset(np.zeros((4, 2)), np.zeros(3))


def test_tensor_dataset_rejects_scalars_and_nothing() -> None:
    with pytest.raises(TypeError, match="at least one dimension"):
        fl.TensorDataset(np.float32(1))
    with pytest.raises(ValueError, match="at least one"):
        fl.TensorDataset()


@pytest.mark.torch
def test_tensor_dataset_accepts_torch_tensors() -> None:
    import torch

    ds = fl.TensorDataset(torch.arange(6).reshape(3, 2), torch.tensor([1, 2, 3]))
    assert len(ds) == 3
    assert ds[1][0].tolist() == [2, 3]


def test_stack_dataset_tuple_and_dict() -> None:
    as_tuple = fl.StackDataset(Squares(3), [10, 11, 12])
    assert as_tuple[2] == (4, 12)
    assert as_tuple.__getitems__([0, 2]) == [(0, 10), (4, 12)]
    as_dict = fl.StackDataset(a=Squares(2), b=["x", "y"])
    assert as_dict[1] == {"a": 1, "b": "y"}
    assert as_dict.__getitems__([1, 0]) == [{"a": 1, "b": "y"}, {"a": 0, "b": "x"}]


def test_stack_dataset_uses_nested_getitems_and_checks_its_length() -> None:
    class Batched(Squares):
        def __getitems__(self, indices):
            return [-i for i in indices][: self.keep]

    nested = Batched(4)
    nested.keep = 10
    assert fl.StackDataset(nested).__getitems__([1, 3]) == [(-1,), (-3,)]
    nested.keep = 1
    with pytest.raises(ValueError, match="returned 1 samples for 2 indices"):
        fl.StackDataset(nested).__getitems__([1, 3])


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((Squares(2),), {"b": Squares(2)}, "not both"),
        ((), {}, "At least one dataset should be passed"),
        ((Squares(2), Squares(3)), {}, r"lengths are \[2, 3\]"),
    ],
)
def test_stack_dataset_errors(args, kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        fl.StackDataset(*args, **kwargs)


def test_concat_dataset_indexing() -> None:
    ds = fl.ConcatDataset([Squares(2), Squares(0), Squares(3)])
    assert len(ds) == 5
    assert ds.cumulative_sizes == [2, 2, 5]
    assert [ds[i] for i in range(5)] == [0, 1, 0, 1, 4]
    assert ds[-1] == 4
    assert ds[-5] == 0


def test_concat_dataset_out_of_range() -> None:
    ds = fl.ConcatDataset([Squares(2), Squares(3)])
    with pytest.raises(ValueError, match="out of range"):
        ds[-6]
    with pytest.raises(IndexError, match="out of range"):
        ds[5]


def test_concat_dataset_rejects_empty_and_iterable() -> None:
    with pytest.raises(AssertionError, match="should not be an empty iterable"):
        fl.ConcatDataset([])
    with pytest.raises(AssertionError, match="ChainDataset"):
        fl.ConcatDataset([Squares(2), Count(0, 3)])


def test_chain_dataset_rejects_map_style() -> None:
    chained = fl.ChainDataset([Count(0, 2), Squares(2)])
    with pytest.raises(AssertionError, match="ChainDataset only supports IterableDataset"):
        list(chained)
    with pytest.raises(AssertionError, match="ChainDataset only supports IterableDataset"):
        len(chained)


def test_subset() -> None:
    sub = fl.Subset(Squares(10), [9, 3, 1])
    assert len(sub) == 3
    assert sub[0] == 81
    assert sub.__getitems__([2, 0]) == [1, 81]


def test_subset_delegates_to_getitems_and_list_indexing() -> None:
    class Batched(Squares):
        calls: typing.ClassVar[list] = []

        def __getitems__(self, indices):
            self.calls.append(list(indices))
            return [self[i] for i in indices]

        def __getitem__(self, i):
            if isinstance(i, list):
                return [super(Batched, self).__getitem__(j) for j in i]
            return super().__getitem__(i)

    base = Batched(10)
    sub = fl.Subset(base, [5, 6, 7])
    assert sub.__getitems__([0, 2]) == [25, 49]
    assert base.calls == [[5, 7]]
    assert sub[[1, 2]] == [36, 49]


def test_subset_subclass_overriding_getitem_only_loads_through_the_override() -> None:
    class Doubled(fl.Subset):
        def __getitem__(self, idx):
            return 2 * super().__getitem__(idx)

    subset = Doubled(Squares(3), [1, 2])
    assert subset.__getitems__([0, 1]) == [2, 8]
    assert [batch.tolist() for batch in fl.DataLoader(subset, batch_size=2)] == [[2, 8]]


def test_random_split_lengths_partition_the_dataset() -> None:
    parts = fl.random_split(Squares(10), [3, 7], generator=0)
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(parts[0].indices + parts[1].indices) == list(range(10))


def test_random_split_is_reproducible_with_a_seed() -> None:
    a = fl.random_split(Squares(20), [5, 15], generator=42)
    b = fl.random_split(Squares(20), [5, 15], generator=np.random.default_rng(42))
    assert a[0].indices == b[0].indices


def test_random_split_fractions_use_pytorch_rounding() -> None:
    # floor(0.3 * 11) = 3, floor(0.3 * 11) = 3, floor(0.4 * 11) = 4; remainder 1 -> first split.
    parts = fl.random_split(Squares(11), [0.3, 0.3, 0.4], generator=0)
    assert [len(p) for p in parts] == [4, 3, 4]


def test_random_split_warns_on_empty_split() -> None:
    with pytest.warns(UserWarning, match="index 1 is 0"):
        parts = fl.random_split(Squares(2), [0.9, 0.1], generator=0)
    assert [len(p) for p in parts] == [2, 0]


def test_random_split_errors() -> None:
    with pytest.raises(ValueError, match="does not equal"):
        fl.random_split(Squares(10), [3, 3])
    with pytest.raises(ValueError, match="not between 0 and 1"):
        fl.random_split(Squares(10), [1.5, -0.5])
    with pytest.raises(TypeError, match="generator"):
        fl.random_split(Squares(10), [5, 5], generator="seed")
