"""Where torch is installed, the drop-in's classes are torch's classes too, and torch's seeds
give torch's orders (the frameworks check torch's types; ported scripts expect torch's splits).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import torch.utils.data as td  # noqa: E402

import flowloader as fl  # noqa: E402
from flowloader.utils import data as fud  # noqa: E402


def seeded(seed: int = 42):
    return torch.Generator().manual_seed(seed)


def batches(loader) -> list[list[int]]:
    return [b.tolist() for b in loader]


class Squares(fud.Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i * i


def test_the_drop_in_types_are_torchs_types() -> None:
    loader = fud.DataLoader(Squares(6), batch_size=2, shuffle=True)
    assert isinstance(loader, td.DataLoader)
    assert isinstance(loader, fl.DataLoader)
    assert isinstance(loader.sampler, td.RandomSampler)
    assert isinstance(loader.batch_sampler, td.BatchSampler)
    assert isinstance(fud.DataLoader(Squares(6)).sampler, td.SequentialSampler)
    assert isinstance(Squares(3), td.Dataset)
    stream = fud.ChainDataset([])
    assert isinstance(stream, td.IterableDataset)
    assert isinstance(stream, fl.IterableDataset)
    assert isinstance(fud.TensorDataset(np.arange(3)), td.TensorDataset)
    assert isinstance(Squares(3) + Squares(2), td.ConcatDataset)
    assert isinstance(fud.DistributedSampler(range(8), 2, 0), td.DistributedSampler)
    assert issubclass(fud.Sampler, td.Sampler)
    assert issubclass(fud.WeightedRandomSampler, td.WeightedRandomSampler)
    # The NumPy-first loader keeps its own kinds.
    assert not isinstance(fl.DataLoader(Squares(6), shuffle=True).sampler, td.RandomSampler)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_torch_generator_gives_torchs_shuffled_order(num_workers) -> None:
    ours = fud.DataLoader(
        range(20), batch_size=6, shuffle=True, generator=seeded(), num_workers=num_workers
    )
    theirs = td.DataLoader(range(20), batch_size=6, shuffle=True, generator=seeded())
    for _ in range(2):  # the second epoch too: the generator advances the same way
        assert batches(ours) == batches(theirs)


def test_the_random_samplers_and_random_split_draw_torchs_indices() -> None:
    weights = [0.1, 0.9, 0.4, 0.7, 3.0, 0.6]
    pairs = [
        (
            fud.RandomSampler(range(9), generator=seeded()),
            td.RandomSampler(range(9), generator=seeded()),
        ),
        (
            fud.RandomSampler(range(9), replacement=True, num_samples=40, generator=seeded()),
            td.RandomSampler(range(9), replacement=True, num_samples=40, generator=seeded()),
        ),
        (
            fud.SubsetRandomSampler([3, 5, 7, 9], seeded()),
            td.SubsetRandomSampler([3, 5, 7, 9], seeded()),
        ),
        (
            fud.WeightedRandomSampler(weights, 5, replacement=False, generator=seeded()),
            td.WeightedRandomSampler(weights, 5, replacement=False, generator=seeded()),
        ),
        (
            fud.DistributedSampler(range(11), 3, 1, seed=7),
            td.DistributedSampler(range(11), 3, 1, seed=7),
        ),
    ]
    for ours, theirs in pairs:
        assert list(ours) == list(theirs), type(ours).__name__
    ours_split = fud.random_split(range(10), [3, 7], generator=seeded(1))
    theirs_split = td.random_split(range(10), [3, 7], generator=seeded(1))
    assert [list(s) for s in ours_split] == [list(s) for s in theirs_split]
    assert all(isinstance(s, td.Subset) for s in ours_split)
    torch.manual_seed(3)  # without a generator: torch's global RNG, as in torch
    ours_split = [list(s) for s in fud.random_split(range(10), [0.5, 0.5])]
    torch.manual_seed(3)
    assert ours_split == [list(s) for s in td.random_split(range(10), [0.5, 0.5])]


def test_torch_manual_seed_reproduces_an_unseeded_loader_and_others_do_not_shift_it() -> None:
    def run(probe: bool) -> list[list[list[int]]]:
        torch.manual_seed(0)
        loader = fud.DataLoader(range(12), batch_size=4, shuffle=True)
        epochs = [batches(loader)]
        if probe:  # a framework iterating another loader draws from torch's global RNG
            other = fud.DataLoader(range(5), shuffle=True)
            iter(other)
            torch.rand(3)
        epochs.append(batches(loader))
        return epochs

    assert run(probe=False) == run(probe=True)
    torch.manual_seed(1)
    assert batches(fud.DataLoader(range(12), batch_size=4, shuffle=True)) != run(False)[0]


@pytest.mark.parametrize("explicit_sampler", [False, True])
def test_resume_is_exact_with_torch_generators(explicit_sampler) -> None:
    def make():
        if explicit_sampler:  # generator=None: torch's global RNG travels in the state
            return fud.DataLoader(range(20), batch_size=3, sampler=fud.RandomSampler(range(20)))
        return fud.DataLoader(range(20), batch_size=3, shuffle=True)

    torch.manual_seed(5)
    torch.nn.Linear(100, 100)  # a model's initialisation draws on torch's global RNG
    loader = make()
    first = batches(loader)
    it = iter(loader)
    head = [next(it).tolist() for _ in range(2)]
    state = loader.state_dict()
    if not explicit_sampler:  # the sampler draws from the loader's generator: saved once
        shared = {"kind": "torch", "state": "as the loader's generator"}
        assert state["sampler"]["generator"] == shared
    else:  # torch's global RNG, packed; the loader's own generator, its seed and words drawn
        assert set(state["sampler"]["generator"]["state"]) == {"packed"}
        assert set(state["generator"]["state"]) == {"seed", "words"}
    assert len(json.dumps(state)) < 4096  # not torch's 5,056 bytes as base64 text, twice
    rest = [b.tolist() for b in it] + [batches(loader)]
    torch.manual_seed(99)  # another seed: the state decides
    resumed = make()
    resumed.load_state_dict(state)
    assert [b.tolist() for b in iter(resumed)] + [batches(resumed)] == rest
    second, third = head + rest[:-1], rest[-1]
    # Each epoch is shuffled anew, so matching ``rest`` shows the state carried the generator.
    assert second not in (first, third)
    assert first != third


def dict_of_tensors(samples):
    batch = fud.default_collate(samples)
    return {"x": batch[0].float().mul(2), "y": batch[1]}  # tensor methods on the result


@pytest.mark.parametrize("num_workers", [0, 2])
def test_default_collate_hands_out_tensors_also_inside_a_users_collate_fn(num_workers) -> None:
    data = fud.TensorDataset(np.arange(8, dtype=np.int32).reshape(4, 2), np.arange(4))
    loader = fud.DataLoader(data, batch_size=2, collate_fn=dict_of_tensors, num_workers=num_workers)
    first = next(iter(loader))
    assert torch.equal(first["x"], torch.tensor([[0.0, 2.0], [4.0, 6.0]]))
    assert first["y"].dtype == torch.int64
    assert isinstance(fud.default_collate([1, 2]), torch.Tensor)
    assert fud.default_collate(["a", "b"]) == ["a", "b"]
    converted = fud.default_convert({"a": np.float32(1.5), "b": 3, "c": np.zeros(2)})
    assert isinstance(converted["a"], torch.Tensor)
    assert converted["b"] == 3
    assert isinstance(converted["c"], torch.Tensor)
    assert fl.default_collate([1, 2]).__class__ is np.ndarray  # the core stays NumPy


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("loader_class", [fud.DataLoader, fl.DataLoader])
def test_nested_and_sparse_tensors_are_refused_with_torchs_message(loader_class, num_workers):
    nested = [torch.nested.nested_tensor([torch.randn(3)]) for _ in range(2)]
    sparse = [torch.eye(3).to_sparse() for _ in range(2)]
    for samples, kind in ((nested, "nested"), (sparse, "sparse")):
        it = iter(loader_class(samples, batch_size=2, num_workers=num_workers))
        try:
            with pytest.raises(
                RuntimeError, match=f"Batches of {kind} tensors are not currently supported"
            ):
                next(it)
        finally:
            it.shutdown()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_the_tensor_collate_gives_tensors_whatever_loader_runs_it(num_workers) -> None:
    data = fud.TensorDataset(np.arange(8).reshape(4, 2))
    for loader in (
        fud.DataLoader(data, batch_size=2, num_workers=num_workers),
        fl.DataLoader(data, batch_size=2, num_workers=num_workers, collate_fn=fud.default_collate),
        fl.DataLoader(
            data,
            batch_size=2,
            num_workers=num_workers,
            collate_fn=fud.default_collate,
            output="torch",
        ),
    ):
        batches = [b for (b,) in loader]
        assert all(type(b) is torch.Tensor for b in batches)
        assert torch.equal(torch.cat(batches), torch.arange(8).reshape(4, 2))


def test_a_torch_output_runs_the_numpy_form_of_the_tensor_collate() -> None:
    """Where the output step makes the tensors, the engine collates with NumPy (into a worker's
    shared memory); users and frameworks still see torch's default_collate."""
    loader = fud.DataLoader(Squares(4), batch_size=2)
    assert loader.collate_fn is fud.default_collate
    assert loader._plan_snapshot().collate_to_run is fl.default_collate
    unbatched = fud.DataLoader(Squares(4), batch_size=None)
    assert unbatched.collate_fn is fud.default_convert
    assert unbatched._plan_snapshot().collate_to_run is fl.default_convert
    numpy_output = fl.DataLoader(Squares(4), batch_size=2, collate_fn=fud.default_collate)
    assert numpy_output._plan_snapshot().collate_to_run is fud.default_collate


class KilledOnLoad(fud.Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> int:
        if i == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return i


@pytest.mark.timeout(60)
def test_a_killed_worker_reads_as_torchs_error_first() -> None:
    with pytest.raises(
        RuntimeError, match=r"^DataLoader worker \(pid \d+\) is killed by signal: Killed"
    ):
        list(fud.DataLoader(KilledOnLoad(), batch_size=2, num_workers=2))


def test_argument_errors_and_warnings_read_as_torchs() -> None:
    cases = [
        ({"num_workers": -1}, ValueError, "num_workers option should be non-negative"),
        ({"timeout": -1}, ValueError, "timeout option should be non-negative"),
        ({"batch_size": None, "drop_last": True}, ValueError, "batch_size=None option disables"),
        (
            {"multiprocessing_context": "spawn"},
            ValueError,
            r"multi-process loading \(num_workers > 0\)",
        ),
        (
            {"num_workers": 1, "multiprocessing_context": "bad"},
            ValueError,
            "should specify a valid start method",
        ),
        (
            {"num_workers": 1, "multiprocessing_context": 3},
            TypeError,
            "should be a valid context object",
        ),
    ]
    for kwargs, error, text in cases:
        with pytest.raises(error, match=text):
            fud.DataLoader(range(4), **kwargs)
    with pytest.warns(
        UserWarning, match="excessive worker creation might get DataLoader running slow"
    ):
        fud.DataLoader(range(4), num_workers=1000)


@pytest.mark.timeout(60)
def test_the_iterator_lists_its_worker_processes_under_torchs_name() -> None:
    it = iter(fud.DataLoader(range(8), batch_size=2, num_workers=2))
    workers = it._workers
    assert len(workers) == 2
    assert all(w.is_alive() for w in workers)
    list(it)
    for w in workers:
        w.join(10)
        assert not w.is_alive()
    assert iter(fud.DataLoader(range(4)))._workers == []


def test_lightning_rebuilds_the_loader_with_its_distributed_sampler() -> None:
    """What Lightning does to a torch DataLoader under DDP, without launching ranks."""
    data_utils = pytest.importorskip("lightning.fabric.utilities.data")
    loader = fud.DataLoader(Squares(10), batch_size=2, shuffle=True, num_workers=0)
    ranks = []
    for rank in range(2):
        sampler = td.DistributedSampler(loader.dataset, num_replicas=2, rank=rank, shuffle=True)
        rebuilt = data_utils._update_dataloader(loader, sampler)
        assert type(rebuilt) is fud.DataLoader
        ranks.append([i for b in rebuilt for i in b.tolist()])
    assert sorted(ranks[0] + ranks[1]) == sorted(i * i for i in range(10))
    assert not set(ranks[0]) & set(ranks[1])


def test_no_warning_for_a_loader_built_with_defaults() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        list(fud.DataLoader(Squares(4), batch_size=2, shuffle=True))


class Unreadable(fud.Dataset):
    def __len__(self) -> int:
        return 41

    def __getitem__(self, i: int) -> int:
        raise NotImplementedError(f"sample {i}")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2, 4])
def test_every_failed_batch_is_raised_and_the_epoch_goes_on(num_workers) -> None:
    """Each batch's error comes out in its turn; none is lost once the workers' prefetched
    batches have all failed (each failure frees its slot for the next batch)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 4 workers on 2 CPUs
        it = iter(fud.DataLoader(Unreadable(), batch_size=2, shuffle=True, num_workers=num_workers))
    errors = 0
    while True:
        try:
            next(it)
        except NotImplementedError:
            errors += 1
        except StopIteration:
            break
    assert errors == 21


def test_worker_info_is_read_only_as_torchs() -> None:
    info = fl.WorkerInfo(id=0, num_workers=1, seed=3, dataset=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.id = 5  # type: ignore[misc]
    assert "seed=3" in repr(info)
    assert info.worker_method == "multiprocessing"


def test_arrays_torch_cannot_hold_stay_arrays_as_in_torch() -> None:
    words = [np.array(["ab", "c"])] * 2
    for loader in (
        fud.DataLoader(words, batch_size=None),
        fl.DataLoader(words, batch_size=None, output="torch"),
    ):
        first = next(iter(loader))
        assert isinstance(first, np.ndarray)
        assert first.tolist() == ["ab", "c"]
    converted = fud.default_convert({"n": np.float32(1.5), "s": np.str_("x")})
    assert isinstance(converted["n"], torch.Tensor)
    assert converted["s"] == "x"
