"""Per-sample generators: handed to datasets that take them, the same for the batch and the
per-sample path, and kept per thread rather than in module state."""

from __future__ import annotations

import threading

import numpy as np

import flowloader as fl
from flowloader import stats
from flowloader.batching import load_one_by_one
from flowloader.randomness import SampleRngs, SampleSeeds


class Draws(fl.Dataset):
    """Sample i: two numbers from the sample's generator, asked for the torch way."""

    def __len__(self) -> int:
        return 12

    def __getitem__(self, index):
        rng = fl.sample_rng()
        return np.array([rng.random(), rng.random()])


class BatchDraws(Draws):
    """The same samples through a batch path that is handed its generators."""

    def __init__(self) -> None:
        self.handed: list = []

    def __getitems__(self, indices, rngs=None):
        self.handed.append(rngs)
        return [rngs[k].random(2) for k in range(len(indices))]  # one generator per sample


def batches(dataset, **kwargs) -> list[np.ndarray]:
    loader = fl.DataLoader(dataset, batch_size=4, shuffle=True, generator=7, **kwargs)
    return list(loader)


def test_a_batch_path_is_handed_the_same_generators_as_the_per_sample_path() -> None:
    dataset = BatchDraws()
    handed = batches(dataset)
    assert all(isinstance(rngs, SampleRngs) for rngs in dataset.handed)
    for a, b in zip(handed, batches(Draws()), strict=True):
        np.testing.assert_array_equal(a, b)


def test_workers_hand_in_the_same_generators() -> None:
    for a, b in zip(batches(BatchDraws(), num_workers=2), batches(Draws()), strict=True):
        np.testing.assert_array_equal(a, b)


def test_subset_keeps_the_wrapped_datasets_own_indices() -> None:
    seeds = SampleSeeds(3)
    subset = fl.Subset(BatchDraws(), [5, 2, 9])
    got = subset.__getitems__([0, 1, 2], rngs=SampleRngs(seeds, [0, 1, 2]))
    expected = [seeds.generator(i).random(2) for i in (5, 2, 9)]
    np.testing.assert_array_equal(np.stack(got), np.stack(expected))


def test_generators_are_made_only_when_asked_for() -> None:
    made = []

    class CountingSeeds(SampleSeeds):
        def generator(self, index):
            made.append(index)
            return super().generator(index)

    rngs = SampleRngs(CountingSeeds(1), [4, 5, 6])
    load_one_by_one(list(range(10)), [4, 5, 6], rngs)
    assert made == []
    assert rngs[1].random() == SampleSeeds(1).generator(5).random()
    assert rngs[1:].indices == [5, 6]


def test_outside_a_loader_there_is_no_sample_generator() -> None:
    assert fl.sample_rng() is None
    assert fl.sample_rng(3) is None
    with fl.sample_context(3, seeds=SampleSeeds(1)):
        first = fl.sample_rng()
        assert first is fl.sample_rng()  # one stream for one load
        assert fl.sample_rng(3).random() == SampleSeeds(1).generator(3).random()
    assert fl.sample_rng() is None


def test_each_thread_sees_only_its_own_sample() -> None:
    seen: dict[int, float] = {}
    barrier = threading.Barrier(2)

    def load(index: int) -> None:
        with fl.sample_context(index, seeds=SampleSeeds(9)):
            barrier.wait()  # both threads are inside their contexts at once
            seen[index] = fl.sample_rng().random()

    threads = [threading.Thread(target=load, args=(i,)) for i in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert seen == {i: SampleSeeds(9).generator(i).random() for i in (1, 2)}


def test_a_thread_does_not_record_into_the_loaders_stage_clock() -> None:
    clock = stats.StageClock()
    previous = stats.set_clock(clock)
    try:

        def elsewhere() -> None:
            with stats.stage("transform"):
                pass

        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join(timeout=10)
        assert clock.transform == 0.0
        with stats.stage("transform"):
            pass
        assert clock.transform > 0.0
    finally:
        stats.set_clock(previous)


def test_one_generator_reset_per_sample_draws_what_fresh_ones_draw() -> None:
    """one_at_a_time(): the kernel's batch path resets one generator for each sample instead
    of building one; every kind of draw (including those that keep half of a 64-bit word for
    the next) comes out as from a fresh generator, for seeds and indices past 64 bits."""
    seeds = SampleSeeds(2**70 + 5)
    indices = [0, 3, 2**64 + 9, 3, 11]
    recycled = SampleRngs(seeds, indices).one_at_a_time()
    assert len(recycled) == len(indices)

    def draws(rng) -> list:
        return [rng.integers(0, 7), rng.random(), rng.integers(0, 3), rng.uniform(1, 2),
                rng.integers(0, 2**40), rng.standard_normal(), rng.random(3).tolist()]  # fmt: skip

    first = recycled[0]
    for k, index in enumerate(indices):
        rng = recycled[k]
        assert rng is first
        assert draws(rng) == draws(seeds.generator(index))
