"""The resume contract as a property: random compositions of orders (a Mixture with schedules
and every stopping rule, read by a sequential, shuffled, distributed or block-shuffled
sampler, by a MixtureBatchSampler, or as video clips by a ClipSampler or UniformClipSampler,
bare or inside Subset, ConcatDataset or Packed; 0 or 2
workers, threads or (one draw in ten) processes, persistent or not) and random chains of 1-3
runs, each resumed from the state the one before saved, with the configuration changed
between them (made longer, a new stage, reweighted from the start). Every resume is either
refused with a ValueError, or the chain's batches are exactly those of one uninterrupted run
of the final configuration: nothing lost, repeated or moved. Where the order reads positions
in sequence over a bare Mixture, a refusal must also be needed: the batches already
delivered differ from the final configuration's.

300 chains here; ``-m slow`` runs 10,000 (docs/design/resume.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flowloader as fl
from flowloader.text import Packed
from flowloader.video import ClipSampler, UniformClipSampler

EPOCHS = 2
STOPPINGS = ("first_exhausted", "all_exhausted", "never")


class ClipView(fl.Dataset[Any]):
    """A dataset seen as videos of ``VIDEO_LEN`` items (the last one shorter), each item a
    clip: the shape ClipSampler and UniformClipSampler read (``clips_per_video``,
    ``clip_starts``); the order contract forwarded to what it wraps, as wrappers do."""

    VIDEO_LEN = 4

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        n = len(dataset)
        self.clips_per_video = np.array(
            [min(self.VIDEO_LEN, n - s) for s in range(0, n, self.VIDEO_LEN)], dtype=np.int64
        )
        self.clip_starts = np.concatenate([[0], np.cumsum(self.clips_per_video)])

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        return self.dataset[index]

    def set_epoch(self, epoch: int) -> None:
        self.dataset.set_epoch(epoch)

    @property
    def epoch(self) -> int:
        return self.dataset.epoch

    def order_state(self) -> dict[str, Any] | None:
        return fl.order.order_state(self.dataset)

    def order_changes(self, saved: Any, read: fl.order.Read) -> list[str]:
        return fl.order.order_changes(self.dataset, saved, read)


class Flaky(fl.Dataset[Any]):
    """Samples ``BAD`` of the first source fail to load: a run of them, whole batches of it
    in sequence, more than the batches in flight. The order contract is forwarded."""

    BAD = range(3, 11)

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        item = self.dataset[index]
        if isinstance(item, (int, np.integer)) and int(item) in self.BAD:
            raise OSError(f"sample {int(item)} is corrupt")
        return item

    def set_epoch(self, epoch: int) -> None:
        fl.order.hand_epoch(self.dataset, epoch)

    @property
    def epoch(self) -> int | None:
        return fl.order.epoch_of(self.dataset)

    def order_state(self) -> dict[str, Any] | None:
        return fl.order.order_state(self.dataset)

    def order_changes(self, saved: Any, read: fl.order.Read) -> list[str]:
        return fl.order.order_changes(self.dataset, saved, read)


@dataclass(frozen=True)
class Config:
    """One run's configuration: the mixture, its wrapper and how the loader reads it."""

    sizes: tuple[int, ...]
    schedule: tuple[tuple[int, tuple[float, ...]], ...]
    stopping: str
    num_samples: int | None
    shuffle_sources: bool
    seed: int
    wrapper: str  # none, subset, concat, packed
    # sequential, shuffled, distributed, distributed_shuffled, block_shuffled (one rank),
    # block_shuffled_by_rank (two), mixture_batches (one rank), mixture_batches_by_rank (two),
    # clips, clips_by_rank (two), uniform_clips
    sampler: str
    batch_size: int
    workers: int | str  # or "auto" (its tuner scripted by the test that sets it)
    persistent: bool
    worker_method: str = "thread"
    flaky: bool = False  # some samples fail to load (OSError), read with skip_errors
    world: int = 2  # the ranks of a distributed order (DistributedSampler's may change)

    def mixture(self) -> fl.Mixture:
        if self.wrapper == "packed":  # documents: token arrays of 1-9 tokens, ids per source
            sources = {
                f"s{k}": [np.full(1 + (i * 7 + k) % 9, k * 1000 + i) for i in range(n)]
                for k, n in enumerate(self.sizes)
            }
        else:
            sources = {f"s{k}": np.arange(n) + k * 1000 for k, n in enumerate(self.sizes)}
        weights = [(start, list(w)) for start, w in self.schedule]
        return fl.Mixture(
            sources,
            weights if len(weights) > 1 else weights[0][1],
            stopping=self.stopping,
            num_samples=self.num_samples,
            shuffle=self.shuffle_sources,
            seed=self.seed,
        )

    @property
    def ranks(self) -> range:
        """The ranks of a distributed order (each reads its own part), else one."""
        by_rank = ("distributed", "mixture_batches_", "block_shuffled_by_rank", "clips_by_rank")
        return range(self.world if self.sampler.startswith(by_rank) else 1)

    def loader(self, rank: int = 0) -> fl.DataLoader:
        mix = self.mixture()
        dataset: Any = {
            "none": lambda: mix,
            "subset": lambda: fl.Subset(mix, list(range(0, len(mix), 2))),
            "concat": lambda: fl.ConcatDataset([mix, np.arange(7) + 10**6]),
            "packed": lambda: Packed(mix, 12, block=4),
        }[self.wrapper]()
        if self.flaky:
            dataset = Flaky(dataset)
        options: dict[str, Any] = {
            "num_workers": self.workers,
            "persistent_workers": self.persistent and self.workers != 0,
            "worker_method": self.worker_method,
            "collate_fn": list,
            "generator": self.seed,  # whatever the sampler: a sampler may change between jobs
        }
        if self.flaky:
            options["skip_errors"] = OSError
        if self.sampler.startswith("mixture_batches"):
            # two ranks in step need as many batches each: drop_last
            ranks = len(self.ranks)
            batches = fl.MixtureBatchSampler(
                mix, self.batch_size, num_replicas=ranks, rank=rank, drop_last=ranks > 1
            )
            return fl.DataLoader(dataset, batch_sampler=batches, **options)
        if self.sampler.endswith("clips") or self.sampler == "clips_by_rank":
            clips = ClipView(mix)
            ranks = len(self.ranks)
            if self.sampler == "uniform_clips":
                sampler: Any = UniformClipSampler(clips, clips_per_video=2)
            else:
                sampler = ClipSampler(
                    clips, clips_per_video=3, seed=self.seed, num_replicas=ranks, rank=rank
                )
            read = Flaky(clips) if self.flaky else clips
            return fl.DataLoader(read, self.batch_size, sampler=sampler, **options)
        if self.sampler.startswith("block_shuffled"):
            ranks = len(self.ranks)
            sampler = fl.BlockShuffleSampler(
                dataset, block_size=3, window=2, seed=self.seed, num_replicas=ranks, rank=rank
            )
            return fl.DataLoader(dataset, self.batch_size, sampler=sampler, **options)
        if self.sampler.startswith("distributed"):
            sampler = fl.DistributedSampler(
                dataset, self.world, rank, shuffle=self.sampler.endswith("shuffled"), seed=self.seed
            )
            return fl.DataLoader(dataset, self.batch_size, sampler=sampler, **options)
        shuffled = self.sampler == "shuffled"
        return fl.DataLoader(dataset, self.batch_size, shuffle=shuffled, **options)

    @property
    def reads_in_sequence(self) -> bool:
        """A bare Mixture read in position order: here the contract refuses only what it must."""
        return self.wrapper == "none" and self.sampler in ("sequential", "distributed")


def key(item: Any) -> Any:
    """A sample as a comparable value (a packed row: its tokens)."""
    if isinstance(item, dict):
        return tuple(item["tokens"][item["segment_ids"] > 0].tolist())
    return int(item)


def run(loader: fl.DataLoader, start_epoch: int, limit: float) -> list[tuple[int, list[Any]]]:
    """Read epochs ``start_epoch`` .. EPOCHS-1 (a resumed loader continues its saved epoch
    first), stopping after ``limit`` batches; each batch with its epoch's number."""
    batches: list[tuple[int, list[Any]]] = []
    if limit <= 0:
        return batches
    for epoch in range(start_epoch, EPOCHS):
        for batch in loader:
            batches.append((epoch, [key(item) for item in batch]))
            if len(batches) >= limit:
                return batches
    return batches


@st.composite
def configs(draw: st.DrawFn) -> Config:
    count = draw(st.integers(2, 3))
    sizes = tuple(draw(st.lists(st.integers(3, 25), min_size=count, max_size=count)))
    weight = st.sampled_from([0.0, 0.2, 0.5, 1.0, 3.0])
    weights = tuple(draw(st.lists(weight, min_size=count, max_size=count)))
    if not any(weights):
        weights = (1.0, *weights[1:])
    stopping = draw(st.sampled_from(STOPPINGS))
    num_samples = draw(st.integers(8, 60)) if stopping == "never" else None
    wrapper = draw(st.sampled_from(["none", "none", "subset", "concat", "packed"]))
    samplers = ["sequential", "shuffled", "distributed", "distributed_shuffled"]
    samplers += ["block_shuffled", "block_shuffled_by_rank"]
    if wrapper == "none":
        samplers += ["mixture_batches", "mixture_batches_by_rank"]
        samplers += ["clips", "clips_by_rank", "uniform_clips"]
    workers = draw(st.sampled_from([0, 2]))
    return Config(
        sizes=sizes,
        schedule=((0, weights),),
        stopping=stopping,
        num_samples=num_samples,
        shuffle_sources=draw(st.booleans()),
        seed=draw(st.integers(0, 3)),
        wrapper=wrapper,
        sampler=draw(st.sampled_from(samplers)),
        batch_size=draw(st.integers(1, 5)),
        workers=workers,
        persistent=draw(st.booleans()),
        # mostly threads (fast to start); processes take the same tasks through a pipe
        worker_method=draw(st.sampled_from(["thread"] * 9 + ["multiprocessing"])),
    )


@st.composite
def changed(draw: st.DrawFn, config: Config) -> Config:
    """The configuration of the next run: the same, made longer, a new stage, or reweighted
    from the start; and possibly another number of workers."""
    how = draw(st.sampled_from(["same", "longer", "stage", "reweight"]))
    count = len(config.sizes)
    weights = tuple(
        draw(st.lists(st.sampled_from([0.2, 1.0, 2.0]), min_size=count, max_size=count))
    )
    if how == "longer" and config.num_samples is not None:
        config = replace(config, num_samples=config.num_samples + draw(st.integers(1, 30)))
    elif how == "stage":
        last = config.schedule[-1][0]
        start = last + draw(st.integers(1, 60))
        config = replace(config, schedule=(*config.schedule, (start, weights)))
    elif how == "reweight":
        config = replace(config, schedule=((0, weights),))
    return replace(config, workers=draw(st.sampled_from([0, 2])))


def resume(loader: fl.DataLoader, state: dict[str, Any]) -> str | None:
    """Load ``state``; the refusal's text if it is refused."""
    try:
        loader.load_state_dict(state)
    except ValueError as refusal:
        text = str(refusal)
    else:
        return None
    assert "does not fit" in text, text
    return text


def check_chain(data: st.DataObject) -> str:
    """One random chain, every rank of it in step, each resumed from its own state; returns
    what happened (and fails on a loss, a repeat, or a needless refusal)."""
    config = data.draw(configs())
    try:
        config.loader()
    except ValueError:  # a Mixture this draw cannot make (all_exhausted with a weight of 0)
        return "invalid"
    ranks = config.ranks
    runs = data.draw(st.integers(1, 3))
    delivered: list[list[tuple[int, list[Any]]]] = [[] for _ in ranks]
    states: list[dict[str, Any]] = []
    for k in range(runs):
        if k:
            config = data.draw(changed(config))
        try:
            loaders = [config.loader(rank) for rank in ranks]
        except ValueError:
            return "invalid"
        limit = float("inf") if k == runs - 1 else data.draw(st.integers(0, 12))
        refusals = [resume(loader, state) for loader, state in zip(loaders, states, strict=False)]
        if any(refusals):
            assert all(refusals), f"ranks disagree: {refusals}"  # the read is every rank's
            if config.reads_in_sequence:
                references = [run(config.loader(rank), 0, float("inf")) for rank in ranks]
                assert any(
                    past != reference[: len(past)]
                    for past, reference in zip(delivered, references, strict=True)
                ), f"refused a resume that changed nothing already read: {refusals[0]}"
            return "refused"
        for rank, loader in zip(ranks, loaders, strict=True):
            delivered[rank] += run(loader, states[rank]["epoch"] if states else 0, limit)
        states = [json.loads(json.dumps(loader.state_dict())) for loader in loaders]
        del loaders
    for rank in ranks:
        assert delivered[rank] == run(config.loader(rank), 0, float("inf")), f"rank {rank}"
    return f"exact after {runs - 1} resumes"


SETTINGS = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    "derandomize": True,
}


@pytest.mark.timeout(600)
@settings(max_examples=300, **SETTINGS)
@given(data=st.data())
def test_random_resume_chains(data: st.DataObject) -> None:
    check_chain(data)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@settings(max_examples=10_000, **SETTINGS)
@given(data=st.data())
def test_random_resume_chains_at_length(data: st.DataObject) -> None:
    check_chain(data)
