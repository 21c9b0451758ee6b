from __future__ import annotations

import collections
from typing import NamedTuple

import numpy as np
import pytest

from flowloader import default_collate, default_convert
from flowloader.collate import collate, default_collate_fn_map


class Point(NamedTuple):
    x: float
    y: int


def test_arrays_are_stacked_keeping_dtype() -> None:
    batch = default_collate([np.full((2, 3), i, dtype=np.uint8) for i in range(4)])
    assert batch.shape == (4, 2, 3)
    assert batch.dtype == np.uint8
    assert batch[3, 0, 0] == 3


@pytest.mark.parametrize(
    ("samples", "dtype"),
    [
        ([1, 2, 3], np.int64),
        ([1.5, 2.0], np.float64),
        ([True, False], np.bool_),
        ([1, 2.5], np.float32),
        ([np.float32(1), np.float32(2)], np.float32),
        ([np.int16(1), np.int16(2)], np.int16),
        ([np.bool_(True), np.bool_(False)], np.bool_),
    ],
)
def test_number_dtypes_follow_pytorch(samples, dtype) -> None:
    batch = default_collate(samples)
    assert isinstance(batch, np.ndarray)
    assert batch.dtype == dtype
    assert batch.shape == (len(samples),)


def test_strings_and_bytes_stay_lists() -> None:
    assert default_collate(["a", "b"]) == ["a", "b"]
    assert default_collate([b"a", b"b"]) == [b"a", b"b"]


def test_mapping_keeps_keys_and_type() -> None:
    samples = [collections.OrderedDict(b=1, a=np.zeros(2)) for _ in range(3)]
    batch = default_collate(samples)
    assert isinstance(batch, collections.OrderedDict)
    assert list(batch) == ["b", "a"]
    assert batch["a"].shape == (3, 2)


def test_immutable_mapping_type_is_rebuilt_or_falls_back_to_dict() -> None:
    class Frozen(collections.abc.Mapping):
        def __init__(self, data):
            self._data = dict(data)

        def __getitem__(self, key):
            return self._data[key]

        def __iter__(self):
            return iter(self._data)

        def __len__(self):
            return len(self._data)

    batch = default_collate([Frozen({"a": 1}), Frozen({"a": 2})])
    assert isinstance(batch, Frozen)
    assert batch["a"].tolist() == [1, 2]


def test_namedtuple_is_kept() -> None:
    batch = default_collate([Point(1.0, 2), Point(3.0, 4)])
    assert isinstance(batch, Point)
    assert batch.x.dtype == np.float64
    assert batch.y.tolist() == [2, 4]


def test_tuples_become_lists_and_lists_stay_lists() -> None:
    assert isinstance(default_collate([(1, 2), (3, 4)]), list)
    batch = default_collate([[1, "a"], [2, "b"]])
    assert isinstance(batch, list)
    assert batch[0].tolist() == [1, 2]
    assert batch[1] == ("a", "b")  # a column of strings stays the tuple zip made, as in PyTorch


def test_nested_structures() -> None:
    samples = [
        {"img": np.ones((2, 2), np.float32), "meta": {"id": i, "tags": ["t"]}} for i in range(2)
    ]
    batch = default_collate(samples)
    assert batch["img"].shape == (2, 2, 2)
    assert batch["meta"]["id"].tolist() == [0, 1]
    assert batch["meta"]["tags"] == [("t", "t")]


def test_ragged_arrays_name_shapes_and_location() -> None:
    samples = [{"img": [np.zeros(3)]}, {"img": [np.zeros(4)]}]
    with pytest.raises(
        RuntimeError, match=r"\(3,\).*element 1 has shape \(4,\).*sample\['img'\]\[0\]"
    ):
        default_collate(samples)


def test_sequences_of_unequal_length() -> None:
    with pytest.raises(RuntimeError, match=r"equal size.*2 fields.*element 1 has 3"):
        default_collate([[1, 2], [1, 2, 3]])


def test_unsupported_type_names_type_and_location() -> None:
    with pytest.raises(TypeError, match=r"object.*sample\['x'\]\[1\]"):
        default_collate([{"x": (1, object())}, {"x": (2, object())}])
    with pytest.raises(TypeError, match="found <class 'NoneType'>"):
        default_collate([None, None])


def test_string_arrays_are_refused() -> None:
    with pytest.raises(TypeError, match="dtype <U1"):
        default_collate([np.array(["a"]), np.array(["b"])])


def test_missing_key_is_named() -> None:
    with pytest.raises(KeyError, match="'b' is in batch element 0 but not in element 1"):
        default_collate([{"a": 1, "b": 2}, {"a": 1}])


def test_out_of_range_python_int() -> None:
    with pytest.raises(TypeError, match="int64 range"):
        default_collate([1, 2**64])


def test_registry_extension() -> None:
    class Box:
        def __init__(self, v):
            self.v = v

    def collate_box(batch, *, collate_fn_map=None):
        return sum(b.v for b in batch)

    registry = {**default_collate_fn_map, Box: collate_box}
    assert collate([(Box(1), 2), (Box(3), 4)], collate_fn_map=registry)[0] == 4


@pytest.mark.torch
def test_torch_tensors_are_stacked_with_torch() -> None:
    import torch

    batch = default_collate([torch.ones(2), torch.zeros(2)])
    assert isinstance(batch, torch.Tensor)
    assert batch.shape == (2, 2)
    with pytest.raises(RuntimeError, match="equal shapes"):
        default_collate([torch.ones(2), torch.zeros(3)])


def test_default_convert() -> None:
    array = np.arange(3)
    assert default_convert(array) is array
    scalar = default_convert(np.float32(2))
    assert isinstance(scalar, np.ndarray)
    assert scalar.shape == ()
    assert scalar.dtype == np.float32
    assert default_convert(5) == 5
    assert default_convert("s") == "s"
    assert default_convert((np.int64(1), 2)) == [np.asarray(1), 2]
    assert isinstance(default_convert(Point(np.float64(1), 2)), Point)
    converted = default_convert({"a": [np.int8(1)]})
    assert converted["a"][0].dtype == np.int8
