"""The resume contract (docs/design/resume.md): the ten ways composed orders lost or repeated
samples (shared/REVIEW-WAVE4.md R1-R7, issue 37's 8-10), each as a test. A resume is either
refused with a ValueError naming the change, or exactly the uninterrupted run."""

from __future__ import annotations

import numpy as np
import pytest

import flowloader as fl
from flowloader.text import Packed

pytestmark = pytest.mark.timeout(120)

TWO = {"a": np.arange(1000), "b": np.arange(1000) + 10**6}


def take(loader: fl.DataLoader, n: int) -> list[list[int]]:
    it = iter(loader)
    return [next(it).tolist() for _ in range(n)]


def flat(batches: list[list[int]]) -> list[int]:
    return [x for batch in batches for x in batch]


def test_r1_a_longer_mixture_after_a_short_source_batch_is_refused() -> None:
    def loader(n: int) -> fl.DataLoader:
        m = fl.Mixture(TWO, [0.5, 0.5], stopping="never", num_samples=n, seed=1)
        return fl.DataLoader(m, batch_sampler=fl.MixtureBatchSampler(m, 8))

    first = loader(100)
    take(first, 13)  # the 13th batch is source a's short last one
    took = r"took samples from the sources as \{'a': 48, 'b': 50\}, now \{'a': 48, 'b': 56\}"
    with pytest.raises(ValueError, match=took):
        loader(200).load_state_dict(first.state_dict())


def test_r1_a_longer_mixture_before_any_short_batch_resumes_exactly() -> None:
    def loader(n: int) -> fl.DataLoader:
        m = fl.Mixture(TWO, [0.5, 0.5], stopping="never", num_samples=n, seed=1)
        return fl.DataLoader(m, batch_sampler=fl.MixtureBatchSampler(m, 8))

    first = loader(100)
    head = take(first, 4)
    resumed = loader(200)
    resumed.load_state_dict(first.state_dict())
    assert head + [b.tolist() for b in resumed] == [b.tolist() for b in loader(200)]


THREE = {f"s{k}": np.arange(10**5) + k * 10**6 for k in range(3)}
OLD = [0.5, 0.3, 0.2]


def three_sources(weights) -> fl.DataLoader:
    m = fl.Mixture(THREE, weights, stopping="never", num_samples=1200, seed=7)
    return fl.DataLoader(m, batch_sampler=fl.MixtureBatchSampler(m, 8))


def two_runs() -> tuple[list[list[int]], fl.DataLoader]:
    """40 batches, a resume, 10 more: what they delivered and the second run's loader."""
    first = three_sources(OLD)
    head = take(first, 40)
    second = three_sources(OLD)
    second.load_state_dict(first.state_dict())
    return head + take(second, 10), second


def test_r2_a_second_resume_checks_the_schedule_against_every_run() -> None:
    _, second = two_runs()
    changed = three_sources([(0, OLD), (100, [0.1, 0.1, 0.8])])
    with pytest.raises(ValueError, match="schedule changed at position 100"):
        changed.load_state_dict(second.state_dict())


def test_r2_a_change_after_every_run_read_is_accepted_and_exact() -> None:
    head, second = two_runs()
    new = [(0, OLD), (800, [0.1, 0.1, 0.8])]
    third = three_sources(new)
    third.load_state_dict(second.state_dict())
    assert head + [b.tolist() for b in third] == [b.tolist() for b in three_sources(new)]


def test_r3_a_state_after_a_short_last_batch_refuses_a_longer_mixture() -> None:
    def mix(n: int) -> fl.Mixture:
        return fl.Mixture(TWO, [0.5, 0.5], stopping="never", num_samples=n)

    first = fl.DataLoader(mix(34), batch_size=4)
    take(first, len(first))  # the last batch (2 samples) handed out, the epoch not ended
    with pytest.raises(ValueError, match="the positions read reach 36"):
        fl.DataLoader(mix(60), batch_size=4).load_state_dict(first.state_dict())


def documents(count: int = 300, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [np.arange(n) + d * 1000 for d, n in enumerate(rng.integers(1, 200, count))]


def tokens(batches) -> list[int]:
    return [t for b in batches for t in b["tokens"][b["segment_ids"] > 0].tolist()]


@pytest.mark.parametrize("workers", [0, 2])
def test_r4_packed_shuffle_with_persistent_workers_loses_no_token(workers: int) -> None:
    docs = documents()
    every = sorted(t for d in docs for t in d.tolist())
    packed = Packed(docs, 128, block=32, shuffle=True, seed=1)
    loader = fl.DataLoader(
        packed, batch_size=4, num_workers=workers, persistent_workers=workers > 0
    )
    orders = []
    for _ in range(3):
        got = tokens(loader)
        assert sorted(got) == every
        orders.append(got)
    assert orders[0] != orders[1] != orders[2]


def test_r4_set_epoch_called_by_hand_still_works() -> None:
    docs = documents()
    packed = Packed(docs, 128, block=32, shuffle=True, seed=1)
    loader = fl.DataLoader(packed, batch_size=4, num_workers=2, persistent_workers=True)
    reference = Packed(docs, 128, block=32, shuffle=True, seed=1)
    for epoch in (0, 5, 2):
        packed.set_epoch(epoch)
        reference.set_epoch(epoch)
        expected = tokens(fl.DataLoader(reference, batch_size=4))
        assert tokens(loader) == expected


def test_r5_packed_shuffle_resumes_in_a_fresh_job_in_its_epoch() -> None:
    docs = documents()

    def loader() -> fl.DataLoader:
        return fl.DataLoader(Packed(docs, 128, block=300, shuffle=True, seed=1), batch_size=4)

    first = loader()
    for _ in range(3):
        list(first)
    it = iter(first)  # epoch 3
    head = [next(it) for _ in range(10)]
    state = first.state_dict()
    assert state["epoch"] == 3
    resumed = loader()
    resumed.load_state_dict(state)
    rest = list(resumed)
    reference = loader()
    for _ in range(3):
        list(reference)
    assert tokens(head + rest) == tokens(list(reference))


def test_r6_packed_shuffle_under_a_distributed_sampler_reads_every_row_once() -> None:
    docs = documents()
    every = sorted(t for d in docs for t in d.tolist())
    packed = [Packed(docs, 128, block=32, shuffle=True, seed=1) for _ in range(2)]
    samplers = [
        fl.DistributedSampler(packed[r], num_replicas=2, rank=r, shuffle=False) for r in range(2)
    ]
    loaders = [fl.DataLoader(packed[r], batch_size=4, sampler=samplers[r]) for r in range(2)]
    for epoch in range(3):
        got = []
        for r in range(2):
            packed[r].set_epoch(epoch)
            samplers[r].set_epoch(epoch)
            got += tokens(loaders[r])
        # padding repeats up to one row per rank; beyond it, every token once
        assert set(got) == set(every)
        assert len(got) - len(every) <= 2 * 128


def test_r7_packed_over_a_reweighted_mixture_is_refused() -> None:
    def src(k: int) -> list[np.ndarray]:
        return [np.full(100, k * 1000 + d) for d in range(400)]

    sources = {"web": src(1), "code": src(2)}

    def rows(weights) -> Packed:
        return Packed(
            fl.Mixture(sources, weights, stopping="never", num_samples=400), 1000, block=64
        )

    first = fl.DataLoader(rows([0.9, 0.1]), batch_size=4)
    take_dicts = iter(first)
    for _ in range(5):
        next(take_dicts)
    state = first.state_dict()
    with pytest.raises(ValueError, match="Packed's dataset: the schedule changed at position 0"):
        fl.DataLoader(rows([0.1, 0.9]), batch_size=4).load_state_dict(state)
    for wrap in (lambda d: fl.Subset(d, range(len(d))), lambda d: fl.ConcatDataset([d, d])):
        a = fl.DataLoader(wrap(fl.Mixture(sources, [0.9, 0.1], num_samples=400, stopping="never")))
        it = iter(a)
        for _ in range(5):
            next(it)
        b = fl.DataLoader(wrap(fl.Mixture(sources, [0.1, 0.9], num_samples=400, stopping="never")))
        with pytest.raises(ValueError, match="the schedule changed at position 0"):
            b.load_state_dict(a.state_dict())


def test_8_a_small_source_gets_a_new_order_every_pass() -> None:
    mix = fl.Mixture(
        {"small": np.arange(10), "big": np.arange(10**6)},
        [0.5, 0.5],
        stopping="never",
        num_samples=20_000,
        seed=3,
    )
    sources, inner = mix.locate_many(np.arange(len(mix)))
    small = inner[sources == 0]
    passes = {tuple(small[k : k + 10].tolist()) for k in range(0, len(small) - 9, 10)}
    assert len(passes) >= 0.9 * (len(small) // 10)


def test_9_a_first_exhausted_mixture_moves_on_through_its_big_source() -> None:
    mix = fl.Mixture({"small": np.arange(100), "big": np.arange(10_000) + 10**6}, [0.5, 0.5])
    loader = fl.DataLoader(mix, batch_size=50, shuffle=True, generator=0)
    seen = set()
    for _ in range(10):
        seen |= {x for b in loader for x in b.tolist() if x >= 10**6}
    assert len(seen) == 1000  # ten epochs, 100 new big-source samples each


def test_10_mixture_batches_split_between_ranks_and_move_on_each_epoch() -> None:
    mix = [fl.Mixture(TWO, [0.7, 0.3], seed=2) for _ in range(2)]
    loaders = [
        fl.DataLoader(m, batch_sampler=fl.MixtureBatchSampler(m, 8, num_replicas=2, rank=r))
        for r, m in enumerate(mix)
    ]
    whole = fl.DataLoader(
        mix[0], batch_sampler=fl.MixtureBatchSampler(mix[0], 8, num_replicas=1, rank=0)
    )
    epochs = []
    for _ in range(2):
        per_rank = [[b.tolist() for b in loader] for loader in loaders]
        everything = [b.tolist() for b in whole]
        assert sorted(per_rank[0] + per_rank[1]) == sorted(everything)  # each batch once
        assert abs(len(per_rank[0]) - len(per_rank[1])) <= 1
        epochs.append(flat(everything))
    big = [{x for x in epoch if x >= 10**6} for epoch in epochs]
    assert big[0]
    assert not big[0] & big[1]  # the big source moved on


class Tagged(fl.Dataset):
    """A user's wrapper that forwards the contract, as docs/design/resume.md shows."""

    def __init__(self, dataset):
        self.dataset = dataset

    def __getitem__(self, i):
        return self.dataset[i]

    def __len__(self):
        return len(self.dataset)

    epoch = property(lambda self: fl.order.epoch_of(self.dataset))

    def set_epoch(self, epoch):
        fl.order.hand_epoch(self.dataset, epoch)

    def order_state(self):
        return fl.order.order_state(self.dataset)

    def order_changes(self, saved, read):
        return fl.order.order_changes(self.dataset, saved, read)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_users_wrapper_that_forwards_the_contract_keeps_it(workers: int) -> None:
    def loader(weights) -> fl.DataLoader:
        mix = fl.Mixture(TWO, weights, stopping="never", num_samples=60, seed=4)
        return fl.DataLoader(Tagged(mix), batch_size=4, num_workers=workers)

    first = loader([0.5, 0.5])
    head = take(first, 3)
    with pytest.raises(ValueError, match="schedule changed at position 0"):
        loader([0.9, 0.1]).load_state_dict(first.state_dict())
    later = [(0, [0.5, 0.5]), (40, [0.9, 0.1])]
    resumed = loader(later)
    resumed.load_state_dict(first.state_dict())
    epochs = head + [b.tolist() for b in resumed] + [b.tolist() for b in resumed]
    reference = loader(later)
    assert epochs == [b.tolist() for b in reference] + [b.tolist() for b in reference]


def test_a_source_added_at_weight_zero_continues_mixture_batches() -> None:
    def loader(sources, weights) -> fl.DataLoader:
        m = fl.Mixture(sources, weights, stopping="never", num_samples=400, seed=3)
        return fl.DataLoader(m, batch_sampler=fl.MixtureBatchSampler(m, 8))

    first = loader(TWO, {"a": 0.5, "b": 0.5})
    head = take(first, 10)
    more = {**TWO, "c": np.arange(50) + 5 * 10**6}
    later = [(0, {"a": 0.5, "b": 0.5, "c": 0}), (200, {"a": 0.4, "b": 0.4, "c": 0.2})]
    resumed = loader(more, later)
    resumed.load_state_dict(first.state_dict())
    assert head + [b.tolist() for b in resumed] == [b.tolist() for b in loader(more, later)]
