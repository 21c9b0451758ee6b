"""Every DataLoader argument error, raised by the pure resolve step."""

from __future__ import annotations

import inspect
import multiprocessing

import numpy as np
import pytest

import flowloader as fl
from flowloader import _plan


class Stream(fl.IterableDataset):
    def __iter__(self):
        return iter(range(3))


MAP = list(range(10))


def resolve(dataset, *args, **kwargs) -> _plan.LoadPlan:
    """The plan for DataLoader(dataset, *args, **kwargs), defaults from its signature."""
    bound = inspect.signature(fl.DataLoader.__init__).bind(None, dataset, *args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    del arguments["self"]
    return _plan.resolve(arguments)


# (dataset, kwargs, exception type, message pattern)
ARGUMENT_ERRORS = [
    (MAP, {"num_workers": -1}, ValueError, "num_workers"),
    (MAP, {"num_workers": 1.5}, TypeError, "num_workers"),
    (MAP, {"timeout": -1}, ValueError, "timeout"),
    (MAP, {"prefetch_factor": 2}, ValueError, "prefetch_factor"),
    (MAP, {"num_workers": 2, "prefetch_factor": -1}, ValueError, "prefetch_factor"),
    (MAP, {"num_workers": 2, "prefetch_factor": 0}, ValueError, "prefetch_factor"),
    (MAP, {"persistent_workers": True}, ValueError, "persistent_workers"),
    (MAP, {"multiprocessing_context": "fork"}, ValueError, "num_workers > 0"),
    (MAP, {"num_workers": 1, "multiprocessing_context": "bogus"}, ValueError, "start method"),
    (MAP, {"num_workers": 1, "multiprocessing_context": 3}, TypeError, "context"),
    (Stream(), {"shuffle": True}, ValueError, "shuffle"),
    (Stream(), {"sampler": [0, 1]}, ValueError, "sampler"),
    (Stream(), {"batch_sampler": [[0]]}, ValueError, "batch_sampler"),
    (MAP, {"shuffle": True, "sampler": [0, 1]}, ValueError, "mutually exclusive with shuffle"),
    (MAP, {"batch_sampler": [[0]], "batch_size": 2}, ValueError, "batch_sampler"),
    (MAP, {"batch_sampler": [[0]], "shuffle": True}, ValueError, "batch_sampler"),
    (MAP, {"batch_sampler": [[0]], "sampler": [0]}, ValueError, "batch_sampler"),
    (MAP, {"batch_sampler": [[0]], "drop_last": True}, ValueError, "batch_sampler"),
    (MAP, {"batch_size": None, "drop_last": True}, ValueError, "drop_last"),
    (MAP, {"batch_size": 0}, ValueError, "batch_size"),
    (MAP, {"batch_size": -2}, ValueError, "batch_size"),
    (MAP, {"batch_size": 2.5}, ValueError, "batch_size"),
    (MAP, {"drop_last": "yes"}, ValueError, "drop_last"),
    (MAP, {"generator": "seed"}, TypeError, "generator"),
    ([], {"shuffle": True}, ValueError, "num_samples"),
]


@pytest.mark.parametrize(("dataset", "kwargs", "error", "match"), ARGUMENT_ERRORS)
def test_argument_errors(dataset, kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        resolve(dataset, **kwargs)
    with pytest.raises(error, match=match):
        fl.DataLoader(dataset, **kwargs)


def test_defaults() -> None:
    plan = resolve(MAP)
    assert isinstance(plan.sampler, fl.SequentialSampler)
    assert isinstance(plan.batch_sampler, fl.BatchSampler)
    assert plan.batch_sampler.batch_size == 1
    assert plan.collate_fn is fl.default_collate
    assert plan.prefetch_factor is None
    assert plan.auto_collation
    assert plan.index_sampler is plan.batch_sampler


def test_workers_get_default_prefetch_factor() -> None:
    assert resolve(MAP, num_workers=2).prefetch_factor == 2


def test_shuffle_gives_random_sampler_sharing_the_generator() -> None:
    plan = resolve(MAP, shuffle=True, generator=3)
    assert isinstance(plan.sampler, fl.RandomSampler)
    assert isinstance(plan.generator, np.random.Generator)
    assert plan.sampler.generator is plan.generator


def test_batch_size_none_disables_auto_collation() -> None:
    plan = resolve(MAP, batch_size=None)
    assert plan.batch_sampler is None
    assert plan.collate_fn is fl.default_convert
    assert plan.index_sampler is plan.sampler


def test_custom_batch_sampler_clears_batch_size() -> None:
    plan = resolve(MAP, batch_sampler=[[0, 1], [2]])
    assert plan.batch_size is None
    assert plan.drop_last is False
    assert plan.batch_sampler == [[0, 1], [2]]


def test_iterable_dataset_gets_infinite_sampler() -> None:
    plan = resolve(Stream(), batch_size=2, shuffle=False)
    assert plan.iterable
    assert isinstance(plan.sampler, fl.sampler._InfiniteConstantSampler)


def test_context_accepts_names_and_objects() -> None:
    assert resolve(MAP, num_workers=1, multiprocessing_context="spawn").multiprocessing_context
    ctx = multiprocessing.get_context("spawn")
    assert resolve(MAP, num_workers=1, multiprocessing_context=ctx).multiprocessing_context is ctx
