"""The resume contract: how whatever shapes an order takes the loader's epoch, describes itself
for a checkpoint, and says whether a resumed configuration keeps what was already read.

Two roles (docs/design/resume.md has the whole contract, and a wrapper's few lines):

- A **sampler** (index or batch sampler) may define ``set_epoch(epoch)``,
  ``read_state(state, taken) -> dict`` (called when a checkpoint is taken: ``state`` is its
  ``state_dict()`` at the epoch's start, ``taken`` the items it has delivered since; the dict
  is JSON-safe and holds ``"prefix"``: the n such that every dataset position read so far lies
  below n, counting every earlier run of the epoch and the whole of a short last batch, or
  None when the positions read are scattered) and ``order_changes(saved, epoch) -> list[str]``
  (called on resume with what ``read_state`` returned: what differs in what was delivered).
  A sampler also describes its settings: ``order_settings() -> dict``, every argument
  that changes which items come out and in what order (``shuffle``, ``window``, ...), JSON-
  safe; the engine compares the saved and the new description key by key wherever the
  epoch has read something, and names each difference. A setting that cannot change what
  was read (``drop_last``, the world size, the seed a state restores) is left out of it.
  One without ``order_settings`` is described by its class name.
- A **dataset** whose items depend on a configuration or an epoch (a Mixture, packed rows) may
  define ``set_epoch(epoch)`` with an ``epoch`` attribute, ``order_state() -> dict | None``
  (what decides its items, JSON-safe; None: nothing to see into) and
  ``order_changes(saved, read) -> list[str]``. Wrappers (Subset, ConcatDataset, Packed)
  forward all three to what they wrap.

The engine calls only the functions below, never a concrete type. A dataset without
``order_state`` is compared by its length alone.
"""

from __future__ import annotations

import hashlib
import numbers
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "Read",
    "describe",
    "digest",
    "epoch_of",
    "file_digest",
    "files_changed",
    "hand_epoch",
    "order_changes",
    "order_state",
    "read_state",
    "settings_changes",
]


@dataclass(frozen=True)
class Read:
    """What a saved state has read of a dataset: every position of the epochs before
    ``epoch``, and of epoch ``epoch`` the positions below ``prefix`` (None: any position, so
    every position and the length must stay). A position below ``prefix`` that did not exist
    must still not exist: a short last batch was read whole."""

    epoch: int
    prefix: int | None

    def at(self, prefix: int | None) -> Read:
        """The same read, of a dataset inside this one, below ``prefix`` of its positions."""
        return Read(self.epoch, prefix)


def hand_epoch(obj: Any, epoch: int) -> None:
    """Give ``obj`` (a sampler, batch sampler or dataset) the loader's epoch, where it takes
    one: its ``set_epoch``, or the sampler a batch sampler wraps."""
    set_epoch = getattr(obj, "set_epoch", None)
    if callable(set_epoch):
        set_epoch(epoch)
        return
    inner = getattr(obj, "sampler", None)
    if inner is not None and inner is not obj:
        hand_epoch(inner, epoch)


def epoch_of(obj: Any) -> int | None:
    """The epoch ``obj`` holds (its ``epoch``, or its wrapped sampler's), None if none."""
    epoch = getattr(obj, "epoch", None)
    if isinstance(epoch, numbers.Integral) and not isinstance(epoch, bool):
        return int(epoch)
    inner = getattr(obj, "sampler", None)
    if inner is not None and inner is not obj and epoch is None:
        return epoch_of(inner)
    return None


def order_state(dataset: Any) -> dict[str, Any] | None:
    """``dataset``'s description for a checkpoint, None where it has none."""
    describe = getattr(dataset, "order_state", None)
    return describe() if callable(describe) else None


def read_state(sampler: Any, state: Any, taken: int) -> dict[str, Any]:
    """What ``sampler`` has read after delivering ``taken`` items since the epoch's start (at
    its ``state``): at least ``{"prefix": n or None}``; a sampler that does not say has read
    nothing (prefix 0) before its first item, and anything (None) after."""
    describe = getattr(sampler, "read_state", None)
    if callable(describe):
        return dict(describe(state, taken))
    return {"prefix": 0 if taken == 0 else None}


def describe(obj: Any) -> dict[str, Any] | None:
    """A sampler's settings as its ``order_settings()`` gives them, else its class name (an
    object that does not describe itself can only be told apart by it); None for None."""
    if obj is None:
        return None
    settings = getattr(obj, "order_settings", None)
    if callable(settings):
        return dict(settings())
    return {"class": type(obj).__name__}


def settings_changes(what: str, saved: Any, now: Any) -> list[str]:
    """The differences between two descriptions (:func:`describe`), one per setting, each
    naming ``what``, the setting and both values; nested descriptions are named by path."""
    if saved == now:
        return []
    if not isinstance(saved, dict) or not isinstance(now, dict):
        return [f"{what}: saved {saved!r}, this loader {now!r}"]
    found = []
    for key in sorted(set(saved) | set(now)):
        before, after = saved.get(key), now.get(key)
        if isinstance(before, dict) and isinstance(after, dict):
            found += settings_changes(f"{what} {key}", before, after)
        elif before != after:
            found.append(f"{what} {key}: saved {before!r}, this loader {after!r}")
    return found


def digest(values: Sequence[float] | np.ndarray) -> str:
    """A short fingerprint of a list of numbers (indices, weights): a checkpoint holds it,
    not the list."""
    array = np.asarray(values)
    data = array.astype(np.float64 if array.dtype.kind == "f" else np.int64).tobytes()
    return f"{len(array)}:{hashlib.blake2b(data, digest_size=12).hexdigest()}"


def order_changes(obj: Any, saved: Any, read: Read | int) -> list[str]:
    """What differs, between the saved description and ``obj``, in what was read (empty:
    nothing). A sampler gets the epoch, a dataset a :class:`Read`."""
    compare = getattr(obj, "order_changes", None)
    if not callable(compare):
        return []
    if saved is None:
        return [
            f"the state holds no description of {type(obj).__name__}'s order to check it "
            "against (it was saved over another dataset or sampler)"
        ]
    return list(compare(saved, read))


def file_digest(path: str, edge: int = 64 << 10) -> str:
    """A short digest of a file's size and its first and last ``edge`` bytes: a signature
    for ``files_changed`` that reads no more than that (a file rewritten to the same size
    and ends is not told apart)."""
    digest = hashlib.sha1()
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        digest.update(str(size).encode())
        digest.update(file.read(edge))
        if size > edge:
            file.seek(max(size - edge, edge))
            digest.update(file.read(edge))
    return digest.hexdigest()[:16]


def files_changed(
    saved: tuple[list[str], list[int]],
    now: tuple[list[str], list[int]],
    read: Read,
    items: Callable[[int], int],
    what: str,
    unit: str,
    signatures: tuple[Sequence[str] | None, Sequence[str] | None] = (None, None),
) -> list[str]:
    """For a dataset of files read in order (a table's files, a list of videos): the files
    holding positions below the prefix read (every file, without a prefix) must be the same
    files with the same ``unit`` counts (and, where both sides have them, the same
    ``signatures``: a digest of what each file holds); later files may be added or change.
    ``saved`` and ``now`` are (names, counts); ``items(count)`` is how many positions a file
    of that count holds; ``what`` names a file in the differences."""
    differences, first = [], 0
    was, is_now = signatures
    if was is None or is_now is None:
        was = is_now = ()  # not compared
    for k, (name, count) in enumerate(zip(*saved, strict=True)):
        if read.prefix is not None and first >= read.prefix:
            break
        if k >= len(now[0]) or (now[0][k], now[1][k]) != (name, count):
            have = "nothing" if k >= len(now[0]) else now[0][k]
            differences.append(f"{what} {k} was {name} ({count} {unit}), now {have}")
        elif k < len(was) and k < len(is_now) and was[k] != is_now[k]:
            differences.append(
                f"{what} {k} ({name}) was rewritten: {count} {unit} as before, other contents"
            )
        first += items(count)
    if read.prefix is None and len(now[0]) != len(saved[0]):
        differences.append(f"there were {len(saved[0])} {what}s, now {len(now[0])}")
    elif read.prefix is not None and not differences:
        # A short last batch was read whole: positions below the prefix that did not exist
        # must still not exist, or that batch would be another batch now.
        before = sum(items(count) for count in saved[1])
        after = sum(items(count) for count in now[1])
        if min(before, read.prefix) != min(after, read.prefix):
            differences.append(
                f"the {what}s held {before} items, now {after}: the positions read reach "
                f"{read.prefix} (a short last batch ended at the old end, and would be "
                "another batch now)"
            )
    return differences
