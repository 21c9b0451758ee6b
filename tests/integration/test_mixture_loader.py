"""A Mixture through the DataLoader keeps every guarantee of the loader: the same batches for
any num_workers and worker method, state_dict() resumed onto another worker count, worker
method or world size (the global batch kept), a schedule changed from the resume point on
(each source continuing where it was), skip_errors, and per-source stats."""

from __future__ import annotations

import random

import numpy as np
import pytest

import flowloader as fl

SIZES = (300, 170, 90)
METHODS = ["multiprocessing", "thread"]
SOURCES = {f"s{k}": np.arange(n) + k * 10**6 for k, n in enumerate(SIZES)}


def mixture(schedule, **options) -> fl.Mixture:
    options.setdefault("stopping", "never")
    options.setdefault("num_samples", 1200)
    return fl.Mixture(SOURCES, schedule, seed=7, **options)


def batches(loader, limit: int | None = None) -> list[list[int]]:
    out: list[list[int]] = []
    if limit == 0:
        return out
    for batch in loader:
        out.append(np.asarray(batch).tolist())
        if len(out) == limit:
            break
    return out


def random_schedule(rng: random.Random, below: int = 1200) -> list:
    starts = sorted(rng.sample(range(1, below), rng.randint(0, 2)))
    return [(start, random_weights(rng)) for start in [0, *starts]]


def random_weights(rng: random.Random) -> dict[str, float]:
    weights = {name: rng.choice([0.0, 0.001, rng.random()]) for name in SOURCES}
    if not any(weights.values()):
        weights["s0"] = 1.0
    return weights


def resume_trial(seed: int) -> None:
    """Stop after a random number of batches with one worker set-up, resume with another,
    maybe with the schedule changed from the resume point on: the batches are those of an
    uninterrupted run of the (new) mixture, each exactly once."""
    rng = random.Random(seed)
    batch_size = rng.choice([1, 5, 12])
    schedule = random_schedule(rng)
    before, after = (
        {"num_workers": rng.randint(0, 3), "worker_method": rng.choice(METHODS)} for _ in "ab"
    )
    stop = rng.randint(0, 1200 // batch_size)
    loader = fl.DataLoader(mixture(schedule), batch_size=batch_size, **before)
    head = batches(loader, stop)
    state = loader.state_dict()
    read = len(head) * batch_size
    if rng.random() < 0.5:  # a new stage from the resume point on (or a later one)
        kept = [stage for stage in schedule if stage[0] < read] or schedule[:1]
        start = rng.randint(max(read, 1), 1300)
        schedule = [*kept, (start, random_weights(rng))]
    resumed = fl.DataLoader(mixture(schedule), batch_size=batch_size, **after)
    resumed.load_state_dict(state)
    rest = batches(resumed)
    reference = batches(fl.DataLoader(mixture(schedule), batch_size=batch_size))
    assert head + rest == reference, (seed, before, after, stop, schedule)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", range(12))
def test_resume_onto_other_workers_and_a_new_schedule_loses_and_repeats_nothing(seed) -> None:
    resume_trial(seed)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_two_hundred_randomised_resume_trials() -> None:
    for seed in range(200):
        resume_trial(1000 + seed)


@pytest.mark.parametrize(("workers", "method"), [(2, "multiprocessing"), (2, "thread")])
def test_the_same_batches_for_any_worker_count_and_method(workers, method) -> None:
    schedule = [(0, [0.6, 0.3, 0.1]), (500, [0.1, 0.1, 0.8])]
    reference = batches(fl.DataLoader(mixture(schedule), batch_size=16))
    loader = fl.DataLoader(
        mixture(schedule), batch_size=16, num_workers=workers, worker_method=method
    )
    assert batches(loader) == reference


def rank_loaders(mix: fl.Mixture, world: int, batch_size: int, state=None) -> list:
    loaders = []
    for rank in range(world):
        sampler = fl.DistributedSampler(mix, num_replicas=world, rank=rank, shuffle=False)
        loader = fl.DataLoader(mix, batch_size=batch_size, sampler=sampler, num_workers=rank % 2)
        if state is not None:
            loader.load_state_dict(state)
        loaders.append(loader)
    return loaders


def global_steps(loaders: list, steps: int | None = None) -> list[list[int]]:
    """Each global step's samples (every rank's batch of that step), sorted."""
    iterators = [iter(loader) for loader in loaders]
    out = []
    while steps is None or len(out) < steps:
        try:
            step = [np.asarray(next(iterator)).tolist() for iterator in iterators]
        except StopIteration:
            break
        out.append(sorted(i for batch in step for i in batch))
    return out


@pytest.mark.timeout(120)
def test_resume_onto_another_world_size_with_the_global_batch_kept() -> None:
    """1 rank of 12, then 2 ranks of 6, then 3 ranks of 4: the global steps are those of one
    uninterrupted rank, so every sample is read once, in the mixture's order of steps."""
    mix = mixture([(0, [0.5, 0.3, 0.2]), (600, [0.2, 0.2, 0.6])])
    reference = global_steps(rank_loaders(mix, 1, 12))
    first = rank_loaders(mix, 1, 12)
    steps = global_steps(first, 20)
    state = first[0].state_dict()
    second = rank_loaders(mix, 2, 6, state)
    steps += global_steps(second, 30)
    state = second[0].state_dict()
    steps += global_steps(rank_loaders(mix, 3, 4, state))
    assert steps == reference
    assert sum(len(step) for step in steps) == len(mix)


def test_a_schedule_changed_before_the_resume_point_is_refused_naming_it() -> None:
    loader = fl.DataLoader(mixture([0.5, 0.3, 0.2]), batch_size=10)
    batches(loader, 30)
    state = loader.state_dict()
    changed = fl.DataLoader(mixture([(0, [0.5, 0.3, 0.2]), (200, [0.1, 0.1, 0.8])]), batch_size=10)
    with pytest.raises(ValueError, match="schedule changed at position 200, before the 300"):
        changed.load_state_dict(state)
    shuffled = fl.DataLoader(
        mixture([(0, [0.5, 0.3, 0.2]), (900, [0.1, 0.1, 0.8])]),
        batch_size=10,
        sampler=fl.RandomSampler(range(1200)),
    )
    with pytest.raises(ValueError, match="sampler"):  # another sampler: the loader says so
        shuffled.load_state_dict(state)


def test_a_changed_source_is_refused() -> None:
    loader = fl.DataLoader(mixture([0.5, 0.3, 0.2]), batch_size=10)
    batches(loader, 3)
    state = loader.state_dict()
    other = dict(SOURCES, s1=np.arange(171))
    resumed = fl.DataLoader(
        fl.Mixture(other, [0.5, 0.3, 0.2], seed=7, stopping="never", num_samples=1200),
        batch_size=10,
    )
    with pytest.raises(ValueError, match="source 's1' had 170 samples, now 171"):
        resumed.load_state_dict(state)


@pytest.mark.parametrize("workers", [0, 2])
def test_stats_count_each_source_s_samples_handed_out(workers) -> None:
    mix = mixture([0.5, 0.3, 0.2])
    iterator = iter(fl.DataLoader(mix, batch_size=10, num_workers=workers))
    for _ in range(13):
        next(iterator)
    assert iterator.stats().sources == mix.counts(130)
    assert sum(1 for _ in iterator) == 107
    assert iterator.stats().sources == mix.counts()


class SomeBad:
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if i % 10 == 3:
            raise OSError(f"sample {i} is corrupt")
        return i


@pytest.mark.parametrize("workers", [0, 2])
def test_skip_errors_drops_a_source_s_bad_samples_and_counts_the_rest(workers) -> None:
    mix = fl.Mixture({"good": list(range(100)), "bad": SomeBad(100)}, [1, 1])
    loader = fl.DataLoader(mix, batch_size=10, num_workers=workers, skip_errors=OSError)
    iterator = iter(loader)
    with pytest.warns(fl.errors.SkippedSampleWarning):
        delivered = sum(len(batch) for batch in iterator)
    skipped = iterator.stats().skipped
    assert delivered + len(skipped) == len(mix)
    assert all(mix.locate(record.index)[0] == "bad" for record in skipped)
    assert iterator.stats().sources["bad"] == mix.counts()["bad"] - len(skipped)


def test_the_drop_in_reads_a_mixture_as_tensors() -> None:
    torch = pytest.importorskip("torch")
    from flowloader.utils import data

    loader = data.DataLoader(data.Mixture(SOURCES, [1, 1, 1]), batch_size=8)
    batch = next(iter(loader))
    assert isinstance(batch, torch.Tensor)
    assert batch.shape == (8,)


@pytest.mark.timeout(120)
def test_batches_from_one_source_resume_onto_other_workers_and_a_new_stage() -> None:
    def loader(schedule, **workers) -> fl.DataLoader:
        mix = mixture(schedule)
        return fl.DataLoader(mix, batch_sampler=fl.MixtureBatchSampler(mix, 8), **workers)

    old = [0.5, 0.3, 0.2]
    first = loader(old, num_workers=2)
    head = batches(first, 40)
    state = first.state_dict()
    new = [(0, old), (400, [0.1, 0.1, 0.8])]  # 40 batches of 8 read positions below 400
    second = loader(new, num_workers=2, worker_method="thread")
    second.load_state_dict(state)
    assert head + batches(second) == batches(loader(new))
    too_early = loader([(0, old), (300, [0.1, 0.1, 0.8])])
    with pytest.raises(ValueError, match="schedule changed at position 300"):
        too_early.load_state_dict(state)


@pytest.mark.timeout(120)
def test_image_folders_and_shards_as_sources_keep_their_batch_paths(tmp_path) -> None:
    """Two ImageFolders (their batch path decodes into the batch) and a shard set on disk,
    mixed: each sample is the one its source gives for its index, with 2 workers as with 0."""
    from flowloader.shards import ShardedDataset, write_shards
    from flowloader.vision import datasets
    from flowloader.vision import transforms as T

    transform = T.Compose([T.CenterCrop(24), T.ToTensor()])
    folders = {}
    for name in ("cats", "dogs"):
        datasets.make_image_folder(
            str(tmp_path / name), num_classes=2, images_per_class=6, size=(40, 30)
        )
        folders[name] = datasets.ImageFolder(str(tmp_path / name), transform=transform)
    images = fl.Mixture(folders, {"cats": 2, "dogs": 1}, stopping="all_exhausted")
    reference = [images[i] for i in range(len(images))]
    for workers in (0, 2):
        loader = fl.DataLoader(images, batch_size=5, num_workers=workers)
        got = [(x, y) for xs, ys in loader for x, y in zip(xs, ys, strict=True)]
        assert len(got) == len(reference)
        for (x, y), (rx, ry) in zip(got, reference, strict=True):
            np.testing.assert_array_equal(x, rx)
            assert y == ry
    samples = [{"__key__": f"k{i:03d}", "txt": f"text {i}"} for i in range(20)]
    shards = ShardedDataset(write_shards(samples, str(tmp_path / "s-%02d.tar"), max_count=6))
    texts = fl.Mixture({"shards": shards, "list": [{"txt": b"list"}] * 5}, [3, 1])
    loader = fl.DataLoader(texts, batch_size=4, num_workers=2, collate_fn=list)
    read = [sample["txt"] for batch in loader for sample in batch]
    assert read == [texts[i]["txt"] for i in range(len(texts))]


def test_torch_datasets_as_sources() -> None:
    torch = pytest.importorskip("torch")
    first = torch.utils.data.TensorDataset(torch.arange(10), torch.arange(10) * 2)
    second = torch.utils.data.TensorDataset(torch.arange(100, 105), torch.arange(5))
    mix = fl.Mixture({"first": first, "second": second}, [1, 1])
    batch = next(iter(fl.DataLoader(mix, batch_size=4, output="torch")))
    assert [tuple(t.shape) for t in batch] == [(4,), (4,)]
    assert batch[0].tolist() == [int(mix[i][0]) for i in range(4)]


def read_and_save(mix, batches_read: int = 20, **options):
    """The first batches read, and the state after them."""
    loader = fl.DataLoader(mix, batch_size=3, collate_fn=list, **options)
    iterator = iter(loader)
    head = [next(iterator) for _ in range(batches_read)]
    return head, loader.state_dict()


A, B, C = ([f"{name}{i}" for i in range(100)] for name in "abc")


@pytest.mark.parametrize(
    "changed",
    [
        # another order of the sources: the same mixture (ties break by name), accepted
        pytest.param(lambda: fl.Mixture({"b": B, "a": A}, {"a": 1, "b": 1}), id="order"),
    ],
)
def test_the_order_of_the_sources_does_not_change_the_mixture(changed) -> None:
    mix = fl.Mixture({"a": A, "b": B}, [1, 1])
    head, state = read_and_save(mix)
    resumed = fl.DataLoader(changed(), batch_size=3, collate_fn=list)
    resumed.load_state_dict(state)
    rest = [sample for batch in resumed for sample in batch]
    whole = [sample for batch in head for sample in batch] + rest
    assert whole == [mix[i] for i in range(len(mix))]


@pytest.mark.parametrize(
    ("changed", "match"),
    [
        (
            lambda: fl.Mixture({"a": A, "b": B, "c": C}, [(0, [1, 1, 1]), (10, [1, 1, 1])]),
            "changed at position 10",
        ),
        # the integer weights differ by one unit: position 0 still reads alike, 1 does not
        (lambda: fl.Mixture({"a": A, "b": B, "c": C}, [1, 1, 1 + 1e-13]), "changed at position 1"),
    ],
    ids=["a boundary with the same weights", "weights equal to 1e-12"],
)
def test_a_schedule_that_orders_read_positions_differently_is_refused(changed, match) -> None:
    mix = fl.Mixture({"a": A, "b": B, "c": C}, [1, 1, 1])
    _, state = read_and_save(mix)
    resumed = fl.DataLoader(changed(), batch_size=3, collate_fn=list)
    with pytest.raises(ValueError, match=match):
        resumed.load_state_dict(state)


def test_a_shuffled_order_over_a_mixture_of_another_length_is_refused() -> None:
    mix = fl.Mixture({"a": A, "b": B}, [1, 1], stopping="never", num_samples=150)
    _, state = read_and_save(mix, 7, shuffle=True, generator=1)
    longer = fl.Mixture({"a": A, "b": B}, [1, 1], stopping="never", num_samples=160)
    resumed = fl.DataLoader(longer, batch_size=3, collate_fn=list, shuffle=True, generator=1)
    with pytest.raises(ValueError, match="the mixture had 150 positions, now 160"):
        resumed.load_state_dict(state)


def test_an_inner_mixture_that_changed_is_refused() -> None:
    def outer(inner_weights):
        inner = fl.Mixture({"a": A, "b": B}, inner_weights, stopping="never", num_samples=100)
        return fl.Mixture({"inner": inner, "c": C}, [1, 1])

    _, state = read_and_save(outer([1, 1]))
    resumed = fl.DataLoader(outer([9, 1]), batch_size=3, collate_fn=list)
    with pytest.raises(ValueError, match="source 'inner': the schedule changed at position 0"):
        resumed.load_state_dict(state)


def test_a_batch_sampler_state_needs_the_same_batch_size() -> None:
    mix = mixture([0.5, 0.3, 0.2])
    first = fl.DataLoader(mix, batch_sampler=fl.MixtureBatchSampler(mix, 4))
    batches(first, 5)
    resumed = fl.DataLoader(mix, batch_sampler=fl.MixtureBatchSampler(mix, 8))
    with pytest.raises(ValueError, match="saved with batch_size=4, not batch_size=8"):
        resumed.load_state_dict(first.state_dict())
