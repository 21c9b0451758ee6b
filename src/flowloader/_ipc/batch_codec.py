"""Encode a batch into a shared-memory segment (worker side) and decode it as views (main side)."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .._compat import torch as _torch
from . import tree
from .segment_pool import Arena, SegmentPool
from .shm import Segment, aligned


class LeafRef(NamedTuple):
    """Where one array of the batch lies in the segment."""

    offset: int
    shape: tuple[int, ...]
    dtype: Any  # a dtype string such as '<f4' (cheap to pickle), or a structured np.dtype
    tensor: bool = False  # the leaf was a torch tensor: the consumer gets one back


def _portable_dtype(dtype: np.dtype) -> Any:
    return dtype.str if dtype.fields is None else dtype


class EncodedBatch(NamedTuple):
    """A batch's structure plus where its arrays lie; small enough for a pipe.

    On the pipe it travels as plain tuples (:meth:`on_wire`): a named tuple pickles through
    ``copyreg``, several times slower. :func:`decode` reads either form by position.
    """

    structure: Any
    segment_name: str | None
    capacity: int
    used: int
    leaves: tuple[LeafRef, ...]

    def on_wire(self) -> tuple[Any, ...]:
        structure, name, capacity, used, leaves = self
        return structure, name, capacity, used, tuple(map(tuple, leaves))


def encode(batch: Any, pool: SegmentPool, arena: Arena | None) -> EncodedBatch:
    """Place the batch's arrays in one segment: where collate already wrote them (``arena``)
    if they are all there or fit there, else in a segment taken from ``pool``. CPU torch
    tensors travel the same way, as the NumPy views of their memory."""
    structure, leaves = tree.split(batch, tensors=True)
    tensor_flags = [type(leaf) is not np.ndarray for leaf in leaves]
    # (tree.split keeps as tensor leaves only tensors that NumPy can view)
    arrays: list[np.ndarray] = [
        _torch.as_shareable_array(leaf) if is_tensor else leaf  # type: ignore[misc]
        for leaf, is_tensor in zip(leaves, tensor_flags, strict=True)
    ]
    if not arrays:
        if arena is not None:
            pool.give_back(arena.segment)
        return EncodedBatch(structure, None, 0, 0, ())
    offsets = _place_in_arena(arrays, arena) if arena is not None else None
    if arena is None or offsets is None:
        if arena is not None:
            pool.give_back(arena.segment)
        arena = Arena(pool.take(sum(aligned(a.nbytes) for a in arrays)))
        offsets = _place_in_arena(arrays, arena)
        assert offsets is not None, "a segment sized for the batch must hold it"
    refs = tuple(
        LeafRef(o, a.shape, _portable_dtype(a.dtype), t)
        for o, a, t in zip(offsets, arrays, tensor_flags, strict=True)
    )
    segment = arena.segment
    return EncodedBatch(structure, segment.name, segment.capacity, arena.used, refs)


def _place_in_arena(arrays: list[np.ndarray], arena: Arena) -> list[int] | None:
    """Offsets of the arrays in the arena, copying in those not already there; None if full."""
    offsets = []
    for array in arrays:
        offset = arena.offset_of(array)
        if offset is None:
            target = arena.allocate(array.shape, array.dtype)
            if target is None:
                return None
            np.copyto(target, array)
            offset = target.ctypes.data - arena.segment.address
        offsets.append(offset)
    return offsets


class SegmentCache:
    """The main process's mappings of worker segments, opened once and reused.

    A segment's file is unlinked as soon as it is mapped here: the worker and this process
    keep sharing the pages through their mappings, and no file is left to leak whichever
    process dies later. From then on no file shows the segment's pages, so every cache keeps
    them in this process's account of what it maps (``mapped_bytes``, for memory_budget):
    the most of it a batch has used, which is what the worker has written.
    """

    def __init__(self) -> None:
        self._segments: dict[str, Segment] = {}

    def get(self, name: str, capacity: int, used: int = 0) -> Segment:
        """The segment ``name`` mapped here (mapped now, and its file unlinked, if new);
        ``used``: the bytes its current batch uses."""
        segment = self._segments.get(name)
        if segment is None:
            segment = self._segments[name] = Segment.attach(name, capacity)
            segment.unlink()
        if used > _mapped.get(name, 0):
            _mapped[name] = used
        return segment

    def __len__(self) -> int:
        return len(self._segments)

    def names(self) -> list[str]:
        return list(self._segments)

    def capacity(self, name: str) -> int:
        return self._segments[name].capacity

    def forget(self, names: tuple[str, ...]) -> None:
        """Unmap these segments (views handed out keep their pages until they go)."""
        for name in names:
            segment = self._segments.pop(name, None)
            if segment is not None:
                segment.close()
                _mapped.pop(name, None)

    def close(self) -> None:
        self.forget(tuple(self._segments))


# Leaves up to this size are copied out of the batch's segment when it is opened: a loop that
# keeps each batch's labels (labels.append(y)) would otherwise keep every batch's whole
# segment, images and all. A copy of a few kilobytes costs a microsecond or two.
SMALL_LEAF_BYTES = 64 << 10


def held_batches() -> int:
    """Batches handed out whose segments the program still holds (some array of each)."""
    return len(_watched)


def held_segments() -> set[str]:
    """The segments of the batches the program still holds."""
    return {name for _, _, name in list(_watched.values())}


# segment name -> the bytes of it in use (the most a batch used), for every segment some
# SegmentCache of this process maps
_mapped: dict[str, int] = {}


class MappedSegments(NamedTuple):
    """This process's mappings of the segments whose names start with a prefix: ``held``
    bytes in ``held_batches`` batches that the program still holds, beyond the newest
    ``in_flight`` opened (those are loaded and waiting to be handed out), and ``other`` bytes
    (those in flight, and those back in their worker's pool)."""

    held: int
    held_batches: int
    other: int


def mapped_bytes(prefix: str, in_flight: int) -> MappedSegments:
    """What this process maps of the segments named ``prefix...``: see MappedSegments. A
    batch is counted as held once a newer batch has been opened for each one in flight."""
    alive = [name for _, _, name in list(_watched.values()) if name.startswith(prefix)]
    held_names = set(alive[: max(len(alive) - in_flight, 0)])
    held = other = 0
    for name, nbytes in list(_mapped.items()):
        if not name.startswith(prefix):
            continue
        if name in held_names:
            held += nbytes
        else:
            other += nbytes
    return MappedSegments(held, len(held_names), other)


def decode(encoded: tuple[Any, ...], cache: SegmentCache, on_drop: Callable[[str], None]) -> Any:
    """The batch with its arrays viewing the shared segment (no copy). ``on_drop(name)`` runs
    once the consumer has dropped every array of the batch."""
    structure, name, capacity, used, leaves = encoded
    if name is None:
        return tree.join(structure, [])
    region = np.frombuffer(cache.get(name, capacity, used).mapping, dtype=np.uint8, count=used)
    arrays = []
    for offset, shape, dtype, tensor in leaves:
        # one constructor call, not a slice, a view and a reshape; its base is `region`
        array = np.ndarray(shape, dtype, region, offset)
        if array.nbytes <= SMALL_LEAF_BYTES:  # its own memory: keeping it keeps no segment
            array = array.copy()
        arrays.append(_torch.require_torch().from_numpy(array) if tensor else array)
    # Every large array's base is `region` (a tensor keeps its array), so it dies with the
    # last of them; a batch of small arrays only gives its segment back at once.
    _watch(region, on_drop, name)
    return tree.join(structure, arrays)


# id(weak reference) -> (the reference, on_drop, segment name), for every batch handed out
# and not yet dropped. A weak reference with a callback, kept here, does what
# weakref.finalize does at a fraction of its cost per batch (no atexit bookkeeping: what
# is pending at exit only queues releases that nobody would send).
_watched: dict[int, tuple[weakref.ref, Callable[[str], None], str]] = {}


def _watch(region: np.ndarray, on_drop: Callable[[str], None], name: str) -> None:
    ref = weakref.ref(region, _dropped)
    _watched[id(ref)] = (ref, on_drop, name)


def _dropped(ref: weakref.ref) -> None:
    _, on_drop, name = _watched.pop(id(ref))
    on_drop(name)
