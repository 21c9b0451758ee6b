"""Checkpoint state for a DataLoader: small, JSON-safe, versioned (no data, only positions and
generator states). See docs/design/checkpoint.md for the semantics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import order
from ._plan import LoadPlan
from ._seed import generator_state, restore_generator

__all__ = [
    "STATE_VERSION",
    "Position",
    "build",
    "check_resumable",
    "generator_state",
    "restore_generator",
]

# 2: the epoch is the loader's, handed to sampler and dataset; "order" says what was read
STATE_VERSION = 2


def sampler_state(sampler: Any) -> Any:
    state_dict = getattr(sampler, "state_dict", None)
    return state_dict() if callable(state_dict) else None


def _unbatched(index_sampler: Any) -> tuple[Any, int]:
    """(the sampler of dataset indices inside ``index_sampler``, indices per batch)."""
    if hasattr(index_sampler, "batch_size") and hasattr(index_sampler, "sampler"):
        return index_sampler.sampler, index_sampler.batch_size
    return index_sampler, 1


def saved_batch_size(state: dict[str, Any]) -> int:
    """The batch size the state was saved with (1 for batch_size=None)."""
    return state["fingerprint"].get("batch_size") or 1


def skip_in_sampler(index_sampler: Any, state: dict[str, Any]) -> bool:
    """Have the sampler itself pass over the batches ``state`` says were delivered, where it
    can (a DistributedSampler resumed on another world size or batch size: ``restart_after``);
    False when it cannot, and the loader must skip them."""
    inner, per_batch = _unbatched(index_sampler)
    restart = getattr(inner, "restart_after", None)
    saved = saved_batch_size(state)
    read = state["batches_yielded"] * saved
    return callable(restart) and bool(restart(read, regroup=per_batch != saved))


def regroups(plan: LoadPlan) -> bool:
    """Whether the loader's sampler can continue a state saved with another batch size
    (DistributedSampler: a world size changed with the global batch kept)."""
    inner, _ = _unbatched(plan.index_sampler)
    return callable(getattr(inner, "restart_after", None))


def fingerprint(plan: LoadPlan) -> dict[str, Any]:
    """What a state must agree on to be resumed (num_workers may differ)."""
    try:
        length = len(plan.dataset)
    except TypeError:
        length = None
    return {
        "dataset": type(plan.dataset).__name__,
        "dataset_length": length,
        "iterable": plan.iterable,
        "sampler": type(plan.sampler).__name__,
        "batch_sampler": (
            type(plan.batch_sampler).__name__ if plan.batch_sampler is not None else None
        ),
        "batch_size": plan.batch_size,
        "drop_last": plan.drop_last,
    }


def check_resumable(state: dict[str, Any], plan: LoadPlan) -> None:
    """Refuse, with a clear ValueError, a state this loader cannot continue: another sampler
    or batch size, or a change in what was already read (flowloader.order's contract)."""
    if not isinstance(state, dict) or state.get("format") != "flowloader.DataLoader":
        raise ValueError("not a flowloader DataLoader state (expected DataLoader.state_dict())")
    if state.get("version") != STATE_VERSION:
        raise ValueError(
            f"DataLoader state version {state.get('version')} is not supported: this "
            f"flowloader reads version {STATE_VERSION}, which records what was read in a way "
            "the older one did not; resuming it would not be exact (start the epoch afresh, "
            "or finish it with the flowloader that saved it)"
        )
    current = fingerprint(plan)
    described = not plan.iterable and order.order_state(plan.dataset) is not None
    if described:
        del current["dataset_length"]  # the dataset checks what was read of it itself
    if regroups(plan) and plan.batch_size is not None and state["fingerprint"].get("batch_size"):
        del current["batch_size"]  # the sampler regroups what is left into this batch size
    differences = [
        f"{key}: saved {state['fingerprint'].get(key)!r}, this loader {value!r}"
        for key, value in current.items()
        if state["fingerprint"].get(key) != value
    ]
    saved_order = state.get("order") or {}
    if not differences and not plan.iterable:
        epoch = int(state["epoch"])
        sampler_read = saved_order.get("sampler") or {"prefix": None}
        differences += order.order_changes(plan.index_sampler, sampler_read, epoch)
        if described:
            read = order.Read(epoch, sampler_read.get("prefix"))
            differences += order.order_changes(plan.dataset, saved_order.get("dataset"), read)
    if differences:
        raise ValueError(
            "this DataLoader state does not fit this loader: " + "; ".join(differences)
        )
    saved_workers = state.get("num_workers", plan.num_workers)
    if plan.iterable and state.get("batches_yielded", 0) and saved_workers != plan.num_workers:
        # Each worker iterates its own share of a stream: the delivered batches can only be
        # replayed by as many workers (an in-process state only by an in-process loader).
        raise ValueError(
            f"this state was saved mid-epoch with num_workers={saved_workers}; an "
            "IterableDataset resumes only onto the same num_workers (each worker iterates "
            f"its own share of the stream), not num_workers={plan.num_workers}"
        )


def build(
    plan: LoadPlan,
    epoch: int,
    batches_yielded: int,
    generator: dict[str, Any],
    sampler: Any,
    num_workers: int,
) -> dict[str, Any]:
    """The state of epoch ``epoch`` after ``batches_yielded`` batches; ``sampler`` is the index
    sampler's state at the epoch's start. "order" says what was read (flowloader.order)."""
    state = {
        "format": "flowloader.DataLoader",
        "version": STATE_VERSION,
        "epoch": epoch,
        "batches_yielded": batches_yielded,
        "generator": generator,
        "sampler": sampler,
        "num_workers": num_workers,
        "fingerprint": fingerprint(plan),
    }
    if not plan.iterable:
        state["order"] = {
            "sampler": order.read_state(plan.index_sampler, sampler, batches_yielded),
            "dataset": order.order_state(plan.dataset),
        }
    return state


@dataclass
class Position:
    """Where one epoch stands: what its checkpoint needs. The epoch's iterator advances it; its
    DataLoader keeps it, so the position outlives an iterator dropped mid-epoch (a ``break``
    out of the loop) and a checkpoint taken afterwards continues from there."""

    plan: LoadPlan
    epoch: int
    generator: dict[str, Any]  # the generator's state at the start of the epoch
    sampler: Any  # the index sampler's state at the start of the epoch
    batches_yielded: int = 0
    exhausted: bool = False  # the last batch was handed out

    def state(self) -> dict[str, Any]:
        plan = self.plan
        if plan.num_workers > 0 and not plan.in_order:
            raise ValueError(
                "state_dict() needs in_order=True: with in_order=False batches arrive out of "
                "sampler order, so no position in the order describes what was delivered"
            )
        state = build(
            plan,
            epoch=self.epoch,
            batches_yielded=self.batches_yielded,
            generator=self.generator,
            sampler=self.sampler,
            num_workers=plan.num_workers,
        )
        state["dataset"] = _stream_state(plan)
        return state


def _stream_state(plan: LoadPlan) -> Any:
    """An iterable dataset's own state where the loader iterates the very object
    (in-process); workers iterate copies whose position the main process cannot ask."""
    state_dict = getattr(plan.dataset, "state_dict", None)
    if plan.iterable and plan.num_workers == 0 and callable(state_dict):
        return state_dict()
    return None
