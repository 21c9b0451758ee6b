"""MixUp/CutMix at the collate step draw from the batch's own generator
(flowloader.batching.batch_rng): Philox keyed by (epoch seed, the batch's number in the
epoch). The same mixed batches, bit for bit, for 0 or 2 workers, threads or processes,
in_order=False, after a resume and after a live change of workers; a batch's number after a
regroup is the place of its first sample; the same indices at another place or in another
epoch draw differently."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import flowloader as fl
from flowloader._iter.epoch import Epoch
from flowloader.batching import batch_context, batch_generator, batch_rng
from flowloader.collate import default_collate
from flowloader.randomness import SampleSeeds
from flowloader.vision import transforms as T

from .test_batch_augment import InMemory, assert_same_bits, cifar_like, cifar_recipe

TAG = 1 << 63


def numbered(samples: list[Any]) -> tuple[Any, int]:
    """A collate_fn that says which batch number batch_rng() was seeded with."""
    generator = batch_rng()
    assert generator is not None
    _seed, key = generator.bit_generator.state["state"]["key"]
    assert key >= TAG  # never a sample's key
    return default_collate(samples), int(key) - TAG


class Labelled(fl.Dataset):
    """Small float images whose label is their index: a plain per-sample dataset."""

    def __init__(self, n: int) -> None:
        self.images = np.random.default_rng(3).random((n, 1, 4, 4), dtype=np.float32)

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[np.ndarray, int]:
        return self.images[i], i % 10


def mixed(
    dataset: Any, mix: Any, *, take: int | None = None, state: Any = None, **options: Any
) -> tuple[list[tuple[np.ndarray, np.ndarray]], Any]:
    """The (images, soft labels) batches of one epoch (the first ``take``), and the state
    after them."""
    options.setdefault("batch_size", 6)
    loader = fl.DataLoader(
        dataset, shuffle=True, generator=np.random.default_rng(5), collate_fn=mix.collate, **options
    )
    if state is not None:
        loader.load_state_dict(state)
    got = []
    for images, labels in loader:
        got.append((np.asarray(images), np.asarray(labels)))
        if take is not None and len(got) == take:
            break
    return got, loader.state_dict()


def assert_same_batches(got: list[Any], expected: list[Any]) -> None:
    assert len(got) == len(expected)
    for (images, labels), (want_images, want_labels) in zip(got, expected, strict=True):
        assert_same_bits(images, want_images)
        assert_same_bits(labels, want_labels)


MIXES = {"mixup": T.MixUp(num_classes=10), "cutmix": T.CutMix(num_classes=10)}
DATASETS = {
    "planned": lambda: InMemory(cifar_like(40), cifar_recipe()),
    "plain": lambda: Labelled(40),
}


@pytest.mark.parametrize("mix", list(MIXES))
@pytest.mark.parametrize("data", list(DATASETS))
@pytest.mark.parametrize(
    "workers", [(2, "thread", True), (2, "multiprocessing", True), (2, "thread", False)]
)
def test_the_mixed_batches_are_the_same_for_any_workers(mix, data, workers) -> None:
    num_workers, method, in_order = workers
    np.random.seed(1)  # the batch's own generator, not NumPy's global one
    expected, _ = mixed(DATASETS[data](), MIXES[mix])
    np.random.seed(2)
    got, _ = mixed(
        DATASETS[data](),
        MIXES[mix],
        num_workers=num_workers,
        worker_method=method,
        in_order=in_order,
    )
    if not in_order:  # the same batches, in the order they arrived
        key = lambda batch: batch[1].tobytes()  # noqa: E731
        got, expected = sorted(got, key=key), sorted(expected, key=key)
    assert_same_batches(got, expected)
    assert len({labels.tobytes() for _, labels in got}) == len(got)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_resumed_epoch_mixes_as_the_uninterrupted_one(num_workers) -> None:
    dataset, mix = InMemory(cifar_like(40), cifar_recipe()), T.MixUp(num_classes=10)
    whole, _ = mixed(dataset, mix)
    _, state = mixed(dataset, mix, take=3)
    rest, _ = mixed(dataset, mix, state=state, num_workers=num_workers, worker_method="thread")
    assert_same_batches(rest, whole[3:])


def numbers(**options: Any) -> tuple[list[int], Any]:
    take = options.pop("take", None)
    state = options.pop("state", None)
    loader = fl.DataLoader(
        Labelled(40), shuffle=True, generator=np.random.default_rng(5), collate_fn=numbered,
        **options,
    )  # fmt: skip
    if state is not None:
        loader.load_state_dict(state)
    found = []
    for _, number in loader:
        found.append(number)
        if take is not None and len(found) == take:
            break
    return found, loader.state_dict()


def test_batches_are_numbered_in_the_epoch_s_order_across_resumes() -> None:
    assert numbers(batch_size=6)[0] == list(range(7))
    _, state = numbers(batch_size=6, take=2)
    rest, state = numbers(batch_size=6, state=state, take=3, num_workers=2)
    assert rest == [2, 3, 4]
    assert numbers(batch_size=6, state=state, num_workers=2, worker_method="multiprocessing")[
        0
    ] == [5, 6]


def test_a_regrouped_rest_is_numbered_by_its_first_sample() -> None:
    _, state = numbers(batch_size=6, take=2)  # 12 samples read
    regrouped, later = numbers(batch_size=4, state=state, take=2)
    assert regrouped == [12, 16]  # after 0 and 1: no earlier batch has these numbers
    # a resume of the regrouped run in its size numbers its rest as that run does
    whole, _ = numbers(batch_size=4, state=state)
    assert whole == [12, 16, 20, 24, 28, 32, 36]
    assert numbers(batch_size=4, state=later, num_workers=2)[0] == whole[2:]
    # regrouped again: on from the samples read, past every number before
    assert numbers(batch_size=5, state=later)[0] == [20, 25, 30, 35]


def test_a_live_change_of_workers_keeps_each_batch_s_number() -> None:
    loader = fl.DataLoader(Labelled(40), batch_size=4, num_workers=2)
    plan = loader._plan_snapshot()
    epoch = Epoch(plan, 0, slots=2, budget=4)
    sent = epoch.assignments()
    assert [a.batch for a in sent] == [a.task_id for a in sent] == [0, 1, 2, 3]
    epoch.move_to(plan, slots=3, budget=6)
    moved = epoch.assignments()
    assert [(a.task_id, a.batch) for a in moved] == [(t, t) for t in range(6)]


def test_the_same_indices_elsewhere_draw_differently() -> None:
    mix = T.MixUp(num_classes=10)
    same = [[0, 1, 2, 3], [0, 1, 2, 3]]
    loader = fl.DataLoader(
        Labelled(8), batch_sampler=same, generator=np.random.default_rng(0), collate_fn=mix.collate
    )
    first, second = (labels for _, labels in loader)
    assert first.tobytes() != second.tobytes()  # two places in one epoch
    again = [labels for _, labels in loader]  # the same places in the next epoch
    assert again[0].tobytes() != first.tobytes()
    assert again[1].tobytes() != second.tobytes()


def test_batch_rng_is_the_batch_s_generator_only_while_collating() -> None:
    assert batch_rng() is None
    seeds = SampleSeeds(9)
    with batch_context(seeds, 4):
        draw = batch_rng()
        assert draw is batch_rng()  # one generator for the whole collate
        value = draw.random()
    assert batch_rng() is None
    assert value == batch_generator(9, 4).random()
    assert batch_generator(9, 4).random() != batch_generator(9, 5).random()
    assert batch_generator(9, 4).random() != batch_generator(10, 4).random()
    assert batch_generator(9, 0).random() != seeds.generator(0).random()
    last = batch_generator(2**64 - 1, 2**63 - 1).bit_generator.state["state"]["key"]
    assert last.tolist() == [2**64 - 1, 2**64 - 1]  # exact, as uint64
    with batch_context(None, 4):
        assert batch_rng() is None
    with pytest.raises(ValueError, match="batch number"):
        batch_generator(9, -1)
    with pytest.raises(ValueError, match="batch number"):
        batch_generator(9, 2**63)


def test_mixup_called_inside_a_custom_collate_fn_draws_from_the_batch() -> None:
    mix = T.MixUp(num_classes=10)
    images = np.random.default_rng(1).random((4, 1, 2, 2), dtype=np.float32)
    labels = np.arange(4)
    with batch_context(SampleSeeds(3), 7):
        inside = mix(images, labels)
    lam = batch_generator(3, 7).beta(1.0, 1.0)
    np.testing.assert_allclose(inside[1][0, 0], lam, rtol=1e-6)
    own = T.MixUp(num_classes=10, rng=np.random.default_rng(0))
    with batch_context(SampleSeeds(3), 7):  # a transform's own rng= comes first
        assert own(images, labels)[1][0, 0] == pytest.approx(
            np.random.default_rng(0).beta(1.0, 1.0), rel=1e-6
        )
