"""A DataLoader as a ``torch.distributed.checkpoint`` (DCP) ``Stateful``: what torchtitan and
other DCP trainers put in the dict they save.

DCP flattens nested dicts into keys, reads a checkpoint into the dict that a *fresh* object's
``state_dict()`` returns (its template), and keeps one copy of a key that several ranks save.
:class:`Stateful` therefore gives a dict whose keys depend only on how the loader is built:
``{"version": 3, "state": "<JSON>"}``, where the JSON is the part every rank shares, plus
``"rank_<r>": "<JSON>"`` where rank r has fields of its own (a stream's position,
``generator=None``'s global generator). Saved on every rank, it checks that the ranks' shared
parts agree. torch is imported only by this module, where it is used."""

from __future__ import annotations

from typing import Any

from .. import _state
from ..distributed import world_or_single

__all__ = ["Stateful"]


class Stateful:
    """``loader`` as DCP's ``Stateful`` (``state_dict`` / ``load_state_dict``), for
    ``dcp.save({"loader": Stateful(loader)}, ...)`` and ``dcp.load`` on every rank.

    ``state_dict()`` returns ``{"version": 3, "state": "<JSON>"}`` (plus this rank's own part
    under ``"rank_<r>"`` for a stream or ``generator=None``), the same keys for a fresh loader
    as for one mid-epoch, so a newly built loader is a valid template. Under torch.distributed
    it is collective: every rank must call it (``dcp.save`` and ``dcp.load`` do), and it raises
    ValueError naming the fields where the ranks' shared parts differ (DCP would keep one of
    them silently); ``check_ranks=False`` skips that exchange. ``load_state_dict`` accepts this
    form or the loader's own ``state_dict()``, and refuses a state that does not fit with the
    loader's ValueError (raised as is: DCP calls it after its own collective steps). A map-style
    loader with a seeded generator resumes on any world size.

    ``process_group`` is the torch.distributed group whose ranks save the loader (the default
    group if None).
    """

    def __init__(self, loader: Any, *, check_ranks: bool = True, process_group: Any = None):
        self.loader = loader
        self.check_ranks = check_ranks
        self.process_group = process_group

    def state_dict(self) -> dict[str, Any]:
        """The loader's state in the fixed-key form (see the class)."""
        world, rank = world_or_single()
        fixed = _state.fixed_form(self.loader.state_dict(), rank)
        if self.check_ranks and world > 1 and _distributed_ready():
            _check_ranks_agree(fixed["state"], rank, self.process_group)
        return fixed

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Continue the loader from ``state_dict`` at its next ``iter()``."""
        self.loader.load_state_dict(state_dict)


def _distributed_ready() -> bool:
    """Whether torch.distributed is initialised in this process (without importing torch)."""
    import sys

    dist = sys.modules.get("torch.distributed")
    return dist is not None and dist.is_available() and dist.is_initialized()


def _check_ranks_agree(shared: str, rank: int, group: Any) -> None:
    """Compare every rank's shared part (one all_gather of a 32-byte digest) and, where one
    differs, gather the parts and raise ValueError, on every rank, naming the fields where
    they differ from the lowest rank's."""
    import hashlib

    import torch
    import torch.distributed as dist

    world = dist.get_world_size(group)
    # NCCL gathers only CUDA tensors (all_gather_object makes the same choice)
    device = torch.device("cuda", torch.cuda.current_device()) if _nccl(group) else "cpu"
    digest = torch.frombuffer(
        bytearray(hashlib.sha256(shared.encode()).digest()), dtype=torch.uint8
    )
    digests = [torch.empty_like(digest, device=device) for _ in range(world)]
    dist.all_gather(digests, digest.to(device), group=group)
    if all(torch.equal(other, digests[0]) for other in digests):
        return
    texts: list[Any] = [None] * world
    dist.all_gather_object(texts, shared, group=group)
    raise ValueError(
        f"{_state.shared_differences(texts, 'rank')} (this is rank {rank}); DCP would keep "
        "only one of them: give every rank's loader the same dataset, sampler settings, "
        "generator and position (a DistributedSampler splits the data by rank)"
    )


def _nccl(group: Any) -> bool:
    import torch.distributed as dist

    return str(dist.get_backend(group)).lower() == "nccl"
