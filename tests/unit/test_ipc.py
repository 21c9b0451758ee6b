"""The wire, without processes: batch tree, shared-memory codec, segment pool, remote errors."""

from __future__ import annotations

import collections
import gc
import pickle
from typing import NamedTuple

import numpy as np
import pytest

from flowloader._fetch import MapFetcher
from flowloader._ipc import shm, tree
from flowloader._ipc.batch_codec import SegmentCache, decode, encode
from flowloader._ipc.remote_error import RemoteError
from flowloader._ipc.segment_pool import Arena, SegmentPool
from flowloader.batching import CollatedSamples
from flowloader.collate import collate, default_collate, default_collate_fn_map
from flowloader.errors import WorkerError

from ..trees import assert_same_tree


class Pair(NamedTuple):
    a: object
    b: object


@pytest.fixture
def pool():
    prefix = f"{shm.process_prefix()}unit_"
    segments = SegmentPool(prefix)
    yield segments
    segments.close(main_gone=True)  # no main process will map what is still in flight
    assert shm.list_segments(prefix) == []


def sample_batch():
    return {
        "x": np.arange(12, dtype=np.float32).reshape(3, 4),
        "y": [np.array([1, 2], np.int64), "text", 3],
        "pair": Pair(np.zeros((0, 2)), np.array(7, np.uint8)),
        "ordered": collections.OrderedDict(k=np.ones(2, bool)),
        "objects": np.array([None, 1], dtype=object),
        "strided": np.arange(20, dtype=np.int32)[::2],
    }


def test_tree_split_and_join_round_trip() -> None:
    batch = sample_batch()
    structure, leaves = tree.split(batch)
    assert len(leaves) == 6  # the object array stays in the structure
    structure = pickle.loads(pickle.dumps(structure))
    assert_same_tree(tree.join(structure, leaves), batch)


def test_encode_decode_round_trip_and_release(pool) -> None:
    """Large leaves view the segment (released when the last is dropped); small ones are
    copies, so a loop that keeps them keeps no segment."""
    batch = {**sample_batch(), "images": np.ones((2, 128, 128), np.float32)}
    encoded = encode(batch, pool, arena=None)
    assert encoded.segment_name is not None
    cache, dropped = SegmentCache(), []
    decoded = decode(pickle.loads(pickle.dumps(encoded)), cache, dropped.append)
    assert_same_tree(decoded, batch)
    assert decoded["images"].base is not None  # a view of the segment
    assert decoded["x"].base is None  # 48 bytes: a copy
    assert dropped == []
    kept = decoded["x"]
    del decoded
    gc.collect()
    assert dropped == [encoded.segment_name]  # the small leaf kept holds nothing
    assert kept.tolist() == batch["x"].tolist()
    cache.close()


def test_a_batch_of_small_leaves_gives_its_segment_back_at_once(pool) -> None:
    encoded = encode(sample_batch(), pool, arena=None)
    cache, dropped = SegmentCache(), []
    decoded = decode(pickle.loads(pickle.dumps(encoded)), cache, dropped.append)
    gc.collect()
    assert dropped == [encoded.segment_name]
    assert_same_tree(decoded, sample_batch())
    cache.close()


def test_collate_writes_straight_into_the_arena(pool) -> None:
    samples = [(np.full((2, 3), i, np.float32), i) for i in range(4)]
    arena = Arena(pool.take(1 << 16))
    batch = collate(
        samples, collate_fn_map=default_collate_fn_map, allocate=arena.allocate_or_empty
    )
    assert arena.offset_of(batch[0]) == 0  # stacked in place, not copied
    encoded = encode(batch, pool, arena)
    assert encoded.segment_name == arena.segment.name
    assert encoded.leaves[0].offset == 0


def test_arena_overflow_moves_the_batch_to_a_bigger_segment(pool) -> None:
    small = Arena(pool.take(16))
    big = np.ones(1 << 21, np.uint8)
    encoded = encode([big], pool, small)
    assert encoded.segment_name != small.segment.name
    assert encoded.capacity >= big.nbytes


def test_batch_without_arrays_needs_no_segment(pool) -> None:
    encoded = encode(["a", 1], pool, Arena(pool.take(10)))
    assert encoded.segment_name is None
    assert decode(encoded, SegmentCache(), lambda name: None) == ["a", 1]


def test_pool_reuses_released_segments(pool) -> None:
    first = pool.take(1000)
    pool.release((first.name,))
    assert pool.take(500) is first
    assert pool.segment_count == 1


def test_pool_retires_free_segments_that_are_too_small(pool) -> None:
    small = pool.take(10)
    pool.release((small.name,))
    bigger = pool.take(small.capacity + 1)
    assert bigger is not small
    assert pool.pop_retired() == (small.name,)
    assert pool.segment_count == 1
    assert small.name not in shm.list_segments()


def test_remote_error_rebuilds_type_and_names_context() -> None:
    try:
        raise ValueError("bad pixel")
    except ValueError as error:
        remote = RemoteError.capture(
            error, worker_id=3, pid=42, indices=[7, 8], where="while loading"
        )
    rebuilt = pickle.loads(pickle.dumps(remote)).rebuild()
    assert type(rebuilt) is ValueError
    message = str(rebuilt)
    assert "worker 3 (pid 42)" in message
    assert "[7, 8]" in message
    assert "bad pixel" in message
    assert "Traceback" in message


def test_remote_error_fallbacks() -> None:
    class Local(Exception):  # a local class cannot be pickled by reference
        pass

    remote = RemoteError.capture(Local("x"), worker_id=0, pid=1, indices=None, where="w")
    assert type(remote.rebuild()) is WorkerError
    keyed = RemoteError.capture(KeyError("k"), worker_id=0, pid=1, indices=[1], where="w")
    assert repr(keyed.rebuild().args[0]).startswith("Caught KeyError")


def test_free_space_check() -> None:
    shm.check_free_space(1)
    with pytest.raises(Exception, match="shm-size"):
        shm.check_free_space(1 << 62)


def test_arrays_of_mixed_dtypes_promote_the_same_with_or_without_the_arena(pool) -> None:
    samples = [np.ones(3, np.float32), np.full(3, 0.1, np.float64)]
    plain = default_collate(samples)
    arena = Arena(pool.take(1 << 16))
    in_arena = collate(
        samples, collate_fn_map=default_collate_fn_map, allocate=arena.allocate_or_empty
    )
    assert plain.dtype == np.float64
    assert in_arena.dtype == plain.dtype
    np.testing.assert_array_equal(in_arena, plain)


@pytest.mark.torch
def test_tensors_collated_in_a_worker_travel_in_the_segment_without_a_copy(pool) -> None:
    torch = pytest.importorskip("torch")
    arena = Arena(pool.take(1 << 16))
    batch = collate(
        [(torch.full((2, 3), float(i)), torch.tensor(i)) for i in range(4)],
        collate_fn_map=default_collate_fn_map,
        allocate=arena.allocate_or_empty,
    )
    used_by_collate = arena.used
    encoded = encode(batch, pool, arena)
    assert encoded.used == used_by_collate  # stacked straight into the segment: no copy
    assert all(ref.tensor for ref in encoded.leaves)
    assert "Tensor" not in repr(encoded.structure)  # nothing is pickled by value
    cache, dropped = SegmentCache(), []
    images, labels = decode(pickle.loads(pickle.dumps(encoded)), cache, dropped.append)
    assert isinstance(images, torch.Tensor)
    assert torch.equal(images[:, 0, 0], torch.arange(4.0))
    assert torch.equal(labels, torch.arange(4))
    del images, labels
    gc.collect()
    assert dropped == [encoded.segment_name]
    cache.close()


@pytest.mark.torch
def test_tensors_numpy_cannot_view_are_pickled_with_the_message(pool) -> None:
    torch = pytest.importorskip("torch")
    batch = [torch.ones(2, dtype=torch.bfloat16), torch.ones(2, requires_grad=True)]
    encoded = encode(batch, pool, arena=None)
    assert encoded.leaves == ()
    cache = SegmentCache()
    decoded = decode(pickle.loads(pickle.dumps(encoded)), cache, lambda name: None)
    assert decoded[0].dtype == torch.bfloat16
    assert decoded[1].requires_grad
    cache.close()


class Columns:
    """A batch-aware dataset that declares only ``allocate``: it stacks its own batch."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int):
        return np.full(4, i, np.float32), i

    def __getitems__(self, indices, allocate):
        images = allocate((len(indices), 4), np.float32)
        images[:] = np.asarray(indices, np.float32)[:, None]
        labels = np.asarray(indices, np.int64)
        return CollatedSamples((images, labels), lambda k: (images[k], int(labels[k])))


def test_a_dataset_that_declares_allocate_writes_its_batch_where_it_travels(pool) -> None:
    arena = Arena(pool.take(1 << 16))
    fetcher = MapFetcher(Columns(), auto_collation=True, collate_fn=default_collate)
    images, labels = fetcher.fetch([3, 1, 2], None, arena.allocate_or_empty)
    assert arena.offset_of(images) == 0  # written in place by the dataset, not copied
    assert images[:, 0].tolist() == [3.0, 1.0, 2.0]
    assert labels.tolist() == [3, 1, 2]
    # Outside a worker process it gets numpy.empty's arrays: the same batch.
    plain_images, _ = MapFetcher(Columns(), True, default_collate).fetch([3, 1, 2])
    np.testing.assert_array_equal(plain_images, images)
