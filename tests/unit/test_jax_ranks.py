"""Samplers take rank and world from jax.distributed where the program initialised it (a
stand-in for the module here; tests/integration/test_orbax.py runs the real one on 2
processes), explicit arguments first, and refuse a torch.distributed that disagrees."""

from __future__ import annotations

import sys
import types

import pytest

import flowloader as fl
from flowloader import distributed


def fake_jax(count: int, index: int, initialized: bool = True) -> types.ModuleType:
    jax = types.ModuleType("jax")
    jax.distributed = types.SimpleNamespace(is_initialized=lambda: initialized)  # type: ignore[attr-defined]
    jax.process_count = lambda: count  # type: ignore[attr-defined]
    jax.process_index = lambda: index  # type: ignore[attr-defined]
    return jax


@pytest.fixture
def no_torchrun(monkeypatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setattr(distributed, "_from_torch_distributed", lambda: None)


def test_a_sampler_takes_rank_and_world_from_jax(monkeypatch, no_torchrun) -> None:
    monkeypatch.setitem(sys.modules, "jax", fake_jax(3, 2))
    sampler = fl.DistributedSampler(range(10), shuffle=False)
    assert (sampler.num_replicas, sampler.rank) == (3, 2)
    assert list(sampler) == [2, 5, 8, 1]  # rank 2's share, padded
    explicit = fl.DistributedSampler(range(10), num_replicas=2, rank=0)
    assert (explicit.num_replicas, explicit.rank) == (2, 0)  # explicit arguments first


def test_jax_without_jax_distributed_is_one_process(monkeypatch, no_torchrun) -> None:
    monkeypatch.setitem(sys.modules, "jax", fake_jax(3, 2, initialized=False))
    assert distributed.world_or_single() == (1, 0)
    monkeypatch.delitem(sys.modules, "jax")
    assert distributed.world_or_single() == (1, 0)


def test_torch_and_jax_that_disagree_are_refused(monkeypatch, no_torchrun) -> None:
    monkeypatch.setitem(sys.modules, "jax", fake_jax(2, 1))
    monkeypatch.setattr(distributed, "_from_torch_distributed", lambda: (2, 0))
    with pytest.raises(ValueError, match=r"torch\.distributed says world size 2, rank 0, but jax"):
        fl.DistributedSampler(range(10))
    monkeypatch.setattr(distributed, "_from_torch_distributed", lambda: (2, 1))
    assert fl.DistributedSampler(range(10)).rank == 1  # they agree
