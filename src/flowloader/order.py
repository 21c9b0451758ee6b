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
- A **dataset** whose items depend on a configuration or an epoch (a Mixture, packed rows) may
  define ``set_epoch(epoch)`` with an ``epoch`` attribute, ``order_state() -> dict | None``
  (what decides its items, JSON-safe; None: nothing to see into) and
  ``order_changes(saved, read) -> list[str]``. Wrappers (Subset, ConcatDataset, Packed)
  forward all three to what they wrap.

The engine calls only the functions below, never a concrete type. A dataset without
``order_state`` is compared by its length alone.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Read",
    "epoch_of",
    "files_changed",
    "hand_epoch",
    "order_changes",
    "order_state",
    "read_state",
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
    its ``state``): at least ``{"prefix": n or None}``."""
    describe = getattr(sampler, "read_state", None)
    if callable(describe):
        return dict(describe(state, taken))
    return {"prefix": None}


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


def files_changed(
    saved: tuple[list[str], list[int]],
    now: tuple[list[str], list[int]],
    read: Read,
    items: Callable[[int], int],
    what: str,
    unit: str,
) -> list[str]:
    """For a dataset of files read in order (a table's files, a list of videos): the files
    holding positions below the prefix read (every file, without a prefix) must be the same
    files with the same ``unit`` counts; later files may be added or change. ``saved`` and
    ``now`` are (names, counts); ``items(count)`` is how many positions a file of that count
    holds; ``what`` names a file in the differences."""
    differences, first = [], 0
    for k, (name, count) in enumerate(zip(*saved, strict=True)):
        if read.prefix is not None and first >= read.prefix:
            break
        if k >= len(now[0]) or (now[0][k], now[1][k]) != (name, count):
            have = "nothing" if k >= len(now[0]) else now[0][k]
            differences.append(f"{what} {k} was {name} ({count} {unit}), now {have}")
        first += items(count)
    if read.prefix is None and len(now[0]) != len(saved[0]):
        differences.append(f"there were {len(saved[0])} {what}s, now {len(now[0])}")
    return differences
