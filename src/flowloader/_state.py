"""Checkpoint state for a DataLoader: small, JSON-safe, versioned (no data, only positions and
generator states). See docs/design/checkpoint.md for the semantics."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from . import order
from ._plan import LoadPlan
from ._seed import generator_kind, generator_state, restore_generator

__all__ = [
    "STATE_VERSION",
    "Position",
    "build",
    "check_resumable",
    "compact",
    "expanded",
    "fixed_form",
    "from_fixed_form",
    "generator_state",
    "is_fixed_form",
    "rank_key",
    "restore_generator",
    "shared_differences",
    "split_ranks",
]

# 2: the epoch is the loader's, handed to sampler and dataset; "order" says what was read
# 3: between epochs a state describes the next epoch; samplers are described by their
#    settings (flowloader.order.describe), not their class names; "samples_before" counts
#    what earlier runs read of an epoch regrouped into another batch size
STATE_VERSION = 3


# A sampler that draws from the loader's generator (PyTorch's shuffle=True hands it the
# loader's), or that shares NumPy's global one with it (generator=None), snapshots the same
# state at the epoch's start: a state holds it once, under "generator" (NumPy's global
# generator is 3.3 KB of state words, a torch.Generator's up to 3.4 KB), and a reference in the
# sampler's place.
_AS_THE_LOADERS = "as the loader's generator"


def compact(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` with the sampler's copies of the loader's generator state replaced by a
    reference to it (:func:`expanded` puts them back)."""
    generator = state.get("generator")
    if not isinstance(generator, dict):
        return state
    return {**state, "sampler": _replaced(state.get("sampler"), generator, _reference(generator))}


def expanded(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` with :func:`compact`'s references replaced by the loader's generator state
    (a state without them, older ones too, is returned as it is)."""
    generator = state.get("generator")
    if not isinstance(generator, dict):
        return state
    return {**state, "sampler": _replaced(state.get("sampler"), _reference(generator), generator)}


def _reference(generator: dict[str, Any]) -> dict[str, Any]:
    """What stands in the sampler's place for the loader's ``generator`` state."""
    return {"kind": generator.get("kind"), "state": _AS_THE_LOADERS}


def _replaced(value: Any, old: Any, new: Any) -> Any:
    """``value`` with every part equal to ``old`` replaced by ``new``."""
    if value == old:
        return new
    if isinstance(value, dict):
        return {key: _replaced(part, old, new) for key, part in value.items()}
    if isinstance(value, list):
        return [_replaced(part, old, new) for part in value]
    return value


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


def samples_read(state: dict[str, Any]) -> int:
    """The samples of the epoch's order ``state`` has delivered, every run of it counted."""
    return state.get("samples_before", 0) + state["batches_yielded"] * saved_batch_size(state)


def skip_in_sampler(index_sampler: Any, state: dict[str, Any]) -> bool:
    """Have the sampler itself pass over the batches ``state`` says were delivered, where it
    can (a DistributedSampler resumed on another world size or batch size: ``restart_after``);
    False when it cannot, and the loader must skip them."""
    inner, per_batch = _unbatched(index_sampler)
    restart = getattr(inner, "restart_after", None)
    regroup = per_batch != saved_batch_size(state) or bool(state.get("samples_before"))
    return callable(restart) and bool(restart(samples_read(state), regroup=regroup))


def regroups(plan: LoadPlan) -> bool:
    """Whether the loader can continue a state saved with another batch size: its own
    batches group a sampler's order (a BatchSampler), whose positions do not depend on the
    grouping (a stream's batches are its workers' own: they cannot be regrouped)."""
    inner, _ = _unbatched(plan.index_sampler)
    return not plan.iterable and plan.batch_size is not None and inner is not plan.index_sampler


def needs_regrouping(plan: LoadPlan, state: dict[str, Any]) -> bool:
    """The loader, not the sampler, regroups what is left of the epoch: the batch size
    changed (or changed in an earlier run) under a sampler without ``restart_after``."""
    changed = saved_batch_size(state) != (plan.batch_size or 1) or state.get("samples_before")
    return bool(changed) and regroups(plan)


def same_samplers(plan: LoadPlan, state: dict[str, Any]) -> bool:
    """Whether ``plan``'s samplers are described as the saved ones were: only then is the
    saved sampler state theirs to restore (a sampler changed before anything of the epoch
    was read starts the epoch afresh)."""
    current, saved = fingerprint(plan), state["fingerprint"]
    return all(current[key] == saved.get(key) for key in ("sampler", "batch_sampler"))


def fingerprint(plan: LoadPlan) -> dict[str, Any]:
    """What a state must agree on to be resumed (num_workers may differ): the samplers'
    settings (flowloader.order.describe) and the batch size; a dataset that does not describe
    itself, by its class name and length (one that does checks what was read of it)."""
    found: dict[str, Any] = {
        "iterable": plan.iterable,
        "sampler": order.describe(plan.sampler),
        # the loader's own BatchSampler over the sampler says nothing more than it
        "batch_sampler": (
            None
            if getattr(plan.batch_sampler, "sampler", None) is plan.sampler
            else order.describe(plan.batch_sampler)
        ),
        "batch_size": plan.batch_size,
    }
    if plan.iterable or order.order_state(plan.dataset) is None:
        try:
            length = len(plan.dataset)
        except TypeError:
            length = None
        found["dataset"] = type(plan.dataset).__name__
        found["dataset_length"] = length
    return found


def check_resumable(state: dict[str, Any], plan: LoadPlan) -> None:
    """Refuse, with a clear ValueError, a state this loader cannot continue: another sampler
    or batch size, or a change in what was already read (flowloader.order's contract)."""
    if not isinstance(state, dict) or state.get("format") != "flowloader.DataLoader":
        raise ValueError("not a flowloader DataLoader state (expected DataLoader.state_dict())")
    if state.get("version") != STATE_VERSION:
        raise ValueError(_version_refusal(state.get("version")))
    current, saved = fingerprint(plan), dict(state["fingerprint"])
    described = not plan.iterable and order.order_state(plan.dataset) is not None
    saved_order = state.get("order") or {}
    sampler_read = saved_order.get("sampler") or {"prefix": None}
    if regroups(plan) and saved.get("batch_size"):
        del current["batch_size"]  # what is left is regrouped into this batch size
        saved.pop("batch_size")
    differences = []
    for key in sorted(set(current) | set(saved)):
        if key in ("sampler", "batch_sampler"):
            if sampler_read.get("prefix") != 0:  # settings may change before any is read
                differences += order.settings_changes(key, saved.get(key), current.get(key))
        elif saved.get(key) != current.get(key):
            differences.append(f"{key}: saved {saved.get(key)!r}, this loader {current.get(key)!r}")
    saved_kind = (state.get("generator") or {}).get("kind")
    if saved_kind != generator_kind(plan.generator):
        differences.append(
            f"generator: saved a {saved_kind} generator, this loader's is "
            f"{type(plan.generator).__name__ if plan.generator is not None else 'None'}"
        )
    if not differences and not plan.iterable:
        epoch = int(state["epoch"])
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


def _version_refusal(version: Any) -> str:
    """Why a state of another version is refused, and what to do."""
    if version == 2:
        why = (
            "version 2 (flowloader before this one) described a state taken between epochs "
            "by the epoch that had ended, and told samplers apart by class name, so resuming "
            "it could replay the last epoch's order"
        )
    else:
        why = f"version {version!r} is not one this flowloader knows"
    return (
        f"this DataLoader state cannot be resumed exactly: {why}; this flowloader reads "
        f"version {STATE_VERSION}. Finish the epoch with the flowloader that saved the state, "
        "or start the next epoch afresh (set_epoch on the sampler or the dataset, without "
        "load_state_dict)"
    )


def build(
    plan: LoadPlan,
    epoch: int,
    batches_yielded: int,
    generator: dict[str, Any],
    sampler: Any,
    num_workers: int,
    samples_before: int = 0,
) -> dict[str, Any]:
    """The state of epoch ``epoch`` after ``batches_yielded`` batches (and, where an earlier
    run read part of the epoch in another batch size, ``samples_before`` samples before
    them); ``sampler`` is the index sampler's state at the epoch's start. "order" says what
    was read (flowloader.order)."""
    state = {
        "format": "flowloader.DataLoader",
        "version": STATE_VERSION,
        "epoch": epoch,
        "batches_yielded": batches_yielded,
        "samples_before": samples_before,
        "generator": generator,
        "sampler": sampler,
        "num_workers": num_workers,
        "fingerprint": fingerprint(plan),
        "dataset": None,  # a stream's own state, where it has one (Position.state)
    }
    if not plan.iterable:
        if samples_before:  # in the wrapped sampler's positions
            inner, per_batch = _unbatched(plan.index_sampler)
            read = order.read_state(inner, sampler, samples_before + batches_yielded * per_batch)
        else:
            read = order.read_state(plan.index_sampler, sampler, batches_yielded)
        state["order"] = {"sampler": read, "dataset": order.order_state(plan.dataset)}
    return compact(state)


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
    samples_before: int = 0  # read by earlier runs of the epoch in another batch size
    # in_order=False: batches handed out ahead of one not handed out yet (then what was
    # delivered is not a prefix of the order, and no position describes it)
    ahead: int = 0

    def state(self) -> dict[str, Any]:
        plan = self.plan
        if self.ahead:
            raise ValueError(
                f"state_dict() with in_order=False: {self.ahead} batch(es) were handed out "
                "ahead of one still loading, so what was delivered is not a prefix of the "
                "sampler's order and no position describes it; take the state where the "
                "batches delivered are a prefix (between epochs, or with in_order=True)"
            )
        state = build(
            plan,
            epoch=self.epoch,
            batches_yielded=self.batches_yielded,
            generator=self.generator,
            sampler=self.sampler,
            num_workers=plan.num_workers,
            samples_before=self.samples_before,
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


# The fields one rank's state holds for that rank alone: NumPy's global generator (each
# process has its own), and everything a stream's position is (each rank reads its own
# stream, in its own number of workers). The rest is the same on every rank.
_STREAM_FIELDS = ("epoch", "batches_yielded", "samples_before", "num_workers", "dataset")


def split_ranks(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the part of ``state`` every rank shares, the part that is this rank's own or None).

    Which fields are a rank's own depends only on how the loader is built (a stream, or
    ``generator=None``), never on its position, so a fresh loader splits the same way as a
    saved one. A map-style loader's ``num_workers`` is left out: it is informative only, and
    under ``num_workers="auto"`` each rank may have reached another count."""
    shared = dict(state)
    own: dict[str, Any] = {}
    if state["fingerprint"].get("iterable"):
        own.update((key, shared.pop(key)) for key in _STREAM_FIELDS if key in shared)
    else:
        shared.pop("num_workers", None)
    if (state.get("generator") or {}).get("kind") == "numpy-global":
        own["generator"] = shared.pop("generator")
    return shared, own or None


def _text(part: dict[str, Any]) -> str:
    """``part`` as canonical JSON: equal states give equal texts (the ranks compare them)."""
    return json.dumps(part, sort_keys=True, separators=(",", ":"))


def rank_key(rank: int) -> str:
    """The key of rank ``rank``'s own part in the fixed form."""
    return f"rank_{rank}"


def fixed_form(state: dict[str, Any], rank: int) -> dict[str, Any]:
    """``state`` as a dict whose keys depend only on how the loader is built and whose leaves
    are an int and strings: ``{"version": 3, "state": "<JSON of the shared part>"}``, plus
    ``"rank_<rank>": "<JSON>"`` where the rank has a part of its own (split_ranks). A
    checkpointer that flattens nested dicts into keys and keeps one copy of a key saved on
    several ranks (torch.distributed.checkpoint) saves it whole."""
    shared, own = split_ranks(state)
    fixed: dict[str, Any] = {"version": STATE_VERSION, "state": _text(shared)}
    if own is not None:
        fixed[rank_key(rank)] = _text(own)
    return fixed


def is_fixed_form(state: Any) -> bool:
    """Whether ``state`` is :func:`fixed_form`'s dict rather than the state itself."""
    return isinstance(state, dict) and isinstance(state.get("state"), str) and "format" not in state


def from_fixed_form(fixed: dict[str, Any], rank: int) -> dict[str, Any]:
    """The state that :func:`fixed_form` wrote, with rank ``rank``'s own part where it has one
    (a state whose shared part says it needs one, and has none for this rank, is refused)."""
    version = fixed.get("version")
    if version != STATE_VERSION:
        raise ValueError(_version_refusal(version))
    try:
        state = json.loads(fixed["state"])
    except ValueError as error:
        raise ValueError(f'this DataLoader state\'s "state" is not JSON: {error}') from None
    own = fixed.get(rank_key(rank))
    if isinstance(own, str):
        state.update(json.loads(own))
    needed = state.get("fingerprint", {}).get("iterable") or "generator" not in state
    if needed and not isinstance(own, str):
        saved = sorted(key for key in fixed if key.startswith("rank_"))
        raise ValueError(
            f"this DataLoader state has no part for rank {rank} (it holds {saved or 'none'}): "
            "a loader over an IterableDataset, or with generator=None (NumPy's global "
            "generator, each process's own), resumes only on the ranks that saved it; give "
            "the loader a seeded generator to resume a map-style dataset on another world size"
        )
    return state


def shared_differences(texts: list[str], who: str) -> str:
    """Where the shared parts ``texts`` (one per rank or process, by number) differ from the
    first: "the ranks' DataLoader states differ ...: rank 1 at batches_yielded (5 vs 6)"."""
    first = json.loads(texts[0])
    differing = []
    for number, text in enumerate(texts[1:], start=1):
        if text != texts[0]:
            fields = _differences(first, json.loads(text))
            differing.append(f"{who} {number} at {', '.join(fields)}")
    return (
        f"the {who}s' DataLoader states differ where every {who}'s should be the same "
        f"(compared with {who} 0): {'; '.join(differing)}"
    )


def _differences(first: Any, other: Any, path: str = "") -> list[str]:
    """The dotted paths where two JSON values differ, with both values (shortened)."""
    if isinstance(first, dict) and isinstance(other, dict):
        found = []
        for key in sorted(set(first) | set(other)):
            found += _differences(first.get(key), other.get(key), f"{path}.{key}".lstrip("."))
        return found
    if first == other:
        return []
    return [f"{path or 'state'} ({_short(first)} vs {_short(other)})"]


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."
