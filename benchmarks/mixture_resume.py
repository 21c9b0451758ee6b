"""Resume trials for benchmarks/mixtures.py: does each mixing library continue a saved run
onto another num_workers, world size or set of weights, and what happens when it cannot
(an error, or repeats and skips without one)? Each trial reports in words."""

from __future__ import annotations

import importlib.util
import itertools
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

PEERS = {  # library -> the module it needs
    "torchdata.nodes": "torchdata",
    "HF datasets": "datasets",
    "Grain": "grain",
}
LIBRARIES = ("flowloader", *PEERS)


def installed(library: str) -> bool:
    return library == "flowloader" or importlib.util.find_spec(PEERS[library]) is not None


def failure_text(error: BaseException) -> str:
    text = " ".join(str(error).split())
    text = text if len(text) <= 90 else text[:87] + "..."
    return f"{type(error).__name__}" + (f": {text}" if text else "")


# -- resume trials ---------------------------------------------------------------------------
# Three sources of 400, 300 and 200 samples at 0.5, 0.3 and 0.2, read in order; a sample is
# coded source * 100_000 + index. Each trial says what happened: "works" (the continuation is
# the uninterrupted one; or, where the order must change, every sample still read exactly
# once), an error, or the repeats and skips it caused without one.

SIZES = (400, 300, 200)
WEIGHTS = (0.5, 0.3, 0.2)
NEW_WEIGHTS = (0.2, 0.3, 0.5)
NAMES = ("a", "b", "c")
CODE = 100_000


def _codes(source: int, size: int, rank: int = 0, world: int = 1) -> list[int]:
    return [source * CODE + i for i in range(size) if i % world == rank]


def per_source_damage(reads: Sequence[int]) -> tuple[int, int]:
    """(repeats, skips) of in-order sources: samples read twice, and samples never read below
    the furthest one read from their source."""
    repeats = skips = 0
    for s in range(len(SIZES)):
        indices = [c % CODE for c in reads if c // CODE == s]
        distinct = len(set(indices))
        repeats += len(indices) - distinct
        skips += (max(indices) + 1 - distinct) if indices else 0
    return repeats, skips


def compare(resumed: Sequence[int], uninterrupted: Sequence[int]) -> str:
    if list(resumed) == list(uninterrupted):
        return "works"
    differ = sum(a != b for a, b in zip(resumed, uninterrupted, strict=False))
    return f"silently different: {differ} of {len(uninterrupted)} positions differ"


def damage(reads: Sequence[int], expected: set[int] | None = None) -> str:
    """For a reweight (expected None: sources read in order) or a whole epoch over another
    world size (expected: what the uninterrupted epoch reads)."""
    if expected is None:
        repeats, skips = per_source_damage(reads)
        if not repeats and not skips:
            return "works (0 repeats, 0 skips)"
        return f"silent: {repeats} repeats, {skips} skips in {len(reads)} reads"
    repeats = len(reads) - len(set(reads))
    missing = len(expected - set(reads))
    if not repeats and not missing:
        return f"works ({len(reads)} read, each once)"
    return f"silent: {repeats} repeats, {missing} never read, of {len(expected)}"


def _trial(run: Callable[[], str]) -> str:
    try:
        return run()
    except Exception as error:
        return f"error: {failure_text(error)}"


def flowloader_trials() -> dict[str, str]:
    from flowloader import DataLoader, DistributedSampler, Mixture

    def sources() -> dict[str, list[int]]:
        return {n: _codes(s, size) for s, (n, size) in enumerate(zip(NAMES, SIZES, strict=True))}

    def mixture(schedule: Any = None) -> Any:
        weights = schedule or dict(zip(NAMES, WEIGHTS, strict=True))
        return Mixture(sources(), weights, seed=0, shuffle=False)

    def read(loader: Any, batches: int | None = None) -> list[int]:
        it = iter(loader)
        taken = itertools.islice(it, batches) if batches is not None else it
        return [int(x) for batch in taken for x in np.asarray(batch).tolist()]

    mix = mixture()
    everything = read(DataLoader(mix, 10))
    saved = DataLoader(mix, 10, num_workers=2, worker_method="thread")
    first = read(saved, 10)
    state = saved.state_dict()

    def workers() -> str:
        outcomes = []
        for count, method in ((0, "thread"), (3, "multiprocessing")):
            with warnings.catch_warnings():  # 3 processes on 2 cores: a warning, on purpose
                warnings.simplefilter("ignore")
                loader = DataLoader(mixture(), 10, num_workers=count, worker_method=method)
            loader.load_state_dict(state)
            outcomes.append(compare(first + read(loader), everything))
        return outcomes[0] if len(set(outcomes)) == 1 else "; ".join(outcomes)

    def world() -> str:
        reads, states = [], []
        for rank in range(2):
            sampler = DistributedSampler(mix, num_replicas=2, rank=rank, shuffle=False)
            loader = DataLoader(mix, 10, sampler=sampler)
            reads += read(loader, 12)
            states.append(loader.state_dict())
        for rank in range(3):
            sampler = DistributedSampler(mix, num_replicas=3, rank=rank, shuffle=False)
            loader = DataLoader(mix, 10, sampler=sampler)
            loader.load_state_dict(states[0])
            reads += read(loader)
        return damage(reads, set(everything))

    def reweight() -> str:
        old = dict(zip(NAMES, WEIGHTS, strict=True))
        new = dict(zip(NAMES, NEW_WEIGHTS, strict=True))
        loader = DataLoader(mixture([(0, old), (len(first), new)]), 10)
        loader.load_state_dict(state)
        outcome = damage(first + read(loader, 10))
        early = DataLoader(mixture([(0, old), (len(first) // 2, new)]), 10)
        try:
            early.load_state_dict(state)
            return outcome + "; a change before the checkpoint: accepted"
        except ValueError:
            return outcome + "; a change before the checkpoint: refused, naming it"

    return {
        "num_workers": _trial(lambda: "2 threads -> 0 and 3 processes: " + workers()),
        "world size": _trial(lambda: "DistributedSampler 2 -> 3 ranks: " + world()),
        "weights": _trial(lambda: "a new stage at the checkpoint: " + reweight()),
    }


def _tag(x: Any) -> Any:
    return x


def torchdata_trials() -> dict[str, str]:
    from torchdata.nodes import IterableWrapper, Loader, MultiNodeWeightedSampler, ParallelMapper
    from torchdata.nodes.samplers.stop_criteria import StopCriteria

    def sampler(weights: Sequence[float] = WEIGHTS, rank: int = 0, world: int = 1) -> Any:
        names = NAMES + ("d",) * (len(weights) > len(NAMES))
        sizes = SIZES + (100,) * (len(weights) > len(SIZES))
        nodes = {
            n: IterableWrapper(_codes(s, size, rank, world))
            for s, (n, size) in enumerate(zip(names, sizes, strict=True))
        }
        return MultiNodeWeightedSampler(
            nodes,
            dict(zip(names, map(float, weights), strict=True)),
            stop_criteria=StopCriteria.ALL_DATASETS_EXHAUSTED,
            rank=rank,
            world_size=world,
            seed=0,
        )

    def loader(workers: int | None, weights: Sequence[float] = WEIGHTS, **where: int) -> Any:
        node = sampler(weights, **where)
        if workers is not None:
            node = ParallelMapper(node, _tag, num_workers=workers, method="thread")
        return Loader(node)

    def read(source: Any, count: int | None = None) -> list[int]:
        return [int(x) for x in itertools.islice(iter(source), count)]

    everything = read(loader(2), 200)
    saved = loader(2)
    first = read(saved, 100)
    state = saved.state_dict()

    def workers() -> str:
        outcomes = []
        for count in (3, 0):
            resumed = loader(count)
            resumed.load_state_dict(state)
            outcome = _trial(lambda r=resumed: compare(first + read(r, 100), everything))
            outcomes.append(f"ParallelMapper 2 -> {count} threads: {outcome}")
        return "; ".join(outcomes)

    def world() -> str:
        reads, states = [], []
        for rank in range(2):
            ranked = loader(None, rank=rank, world=2)
            reads += read(ranked, 150)
            states.append(ranked.state_dict())
        for rank in range(3):  # the third rank has no saved state: it starts afresh
            ranked = loader(None, rank=rank, world=3)
            if rank < len(states):
                ranked.load_state_dict(states[rank])
            reads += read(ranked)
        return damage(reads, {c for s, n in enumerate(SIZES) for c in _codes(s, n)})

    def reweight() -> str:
        resumed = loader(2, NEW_WEIGHTS)
        resumed.load_state_dict(state)
        outcome = damage(first + read(resumed, 100))
        grown = loader(2, (*NEW_WEIGHTS, 0.1))
        grown.load_state_dict(state)
        added = _trial(lambda: damage(first + read(grown, 100)))
        return f"{outcome}; a source added: {added}"

    return {
        "num_workers": _trial(workers),
        "world size": _trial(lambda: "ranks 2 -> 3, rank 2 afresh: " + world()),
        "weights": _trial(reweight),
    }


def hf_trials() -> dict[str, str]:
    import datasets
    from datasets.distributed import split_dataset_by_node

    datasets.disable_progress_bars()

    def mixed(weights: Sequence[float] = WEIGHTS, stopping: str = "first_exhausted") -> Any:
        parts = [
            datasets.Dataset.from_dict({"c": _codes(s, n)}).to_iterable_dataset(num_shards=6)
            for s, n in enumerate(SIZES)
        ]
        return datasets.interleave_datasets(
            parts, probabilities=list(weights), seed=0, stopping_strategy=stopping
        )

    def read(dataset: Any, count: int | None = None) -> list[int]:
        return [int(example["c"]) for example in itertools.islice(dataset, count)]

    def workers() -> str:
        from torchdata.stateful_dataloader import StatefulDataLoader

        def batches(loader: Any, count: int) -> list[int]:
            it = iter(loader)
            return [int(c) for _ in range(count) for c in next(it)["c"].tolist()]

        everything = batches(StatefulDataLoader(mixed(), batch_size=10, num_workers=2), 20)
        saved = StatefulDataLoader(mixed(), batch_size=10, num_workers=2)
        first = batches(saved, 10)
        state = saved.state_dict()
        outcomes = []
        for count in (2, 3):
            resumed = StatefulDataLoader(mixed(), batch_size=10, num_workers=count)
            resumed.load_state_dict(state)
            outcomes.append(
                f"2 -> {count}: "
                + _trial(lambda r=resumed: compare(first + batches(r, 10), everything))
            )
        return "StatefulDataLoader " + "; ".join(outcomes)

    def world() -> str:
        stopping = "all_exhausted_without_replacement"  # every sample exactly once
        reads, states = [], []
        for rank in range(2):
            ranked = split_dataset_by_node(mixed(stopping=stopping), rank=rank, world_size=2)
            reads += read(ranked, 250)
            states.append(ranked.state_dict())
        for rank in range(3):
            ranked = split_dataset_by_node(mixed(stopping=stopping), rank=rank, world_size=3)
            if rank < len(states):
                ranked.load_state_dict(states[rank])
            reads += read(ranked)
        return damage(reads, {c for s, n in enumerate(SIZES) for c in _codes(s, n)})

    def reweight() -> str:
        saved = mixed()
        first = read(saved, 100)
        resumed = mixed(NEW_WEIGHTS)
        resumed.load_state_dict(saved.state_dict())
        iterable = damage(first + read(resumed, 100))
        # map-style: no state; a rebuilt interleave, continued at the same position
        parts = [datasets.Dataset.from_dict({"c": _codes(s, n)}) for s, n in enumerate(SIZES)]
        old = datasets.interleave_datasets(parts, probabilities=list(WEIGHTS), seed=0)
        new = datasets.interleave_datasets(parts, probabilities=list(NEW_WEIGHTS), seed=0)
        rebuilt = damage(list(old[:100]["c"]) + list(new[100:200]["c"]))
        return f"iterable: {iterable}; map-style rebuilt: {rebuilt}"

    return {
        "num_workers": _trial(workers)
        if installed("torchdata.nodes")
        else "not tried: torchdata (StatefulDataLoader) is not installed",
        "world size": _trial(lambda: "split_dataset_by_node 2 -> 3: " + world()),
        "weights": _trial(reweight),
    }


def grain_trials() -> dict[str, str]:
    import grain

    def sources() -> list[Any]:
        return [grain.MapDataset.source(_codes(s, n)) for s, n in enumerate(SIZES)]

    def mixed(weights: Sequence[float] = WEIGHTS) -> Any:
        return grain.MapDataset.mix(sources(), list(weights))

    def read(iterator: Any, count: int | None = None) -> list[int]:
        return [int(x) for x in itertools.islice(iterator, count)]

    everything = read(iter(mixed().to_iter_dataset()), 200)

    def workers() -> str:
        def prefetched(count: int) -> Any:
            options = grain.MultiprocessingOptions(num_workers=count)
            return iter(mixed().to_iter_dataset().mp_prefetch(options))

        saved = prefetched(2)
        first = read(saved, 100)
        state = saved.get_state()
        saved.close()

        def resume(count: int) -> str:
            resumed = prefetched(count)
            try:
                resumed.set_state(state)
                return compare(first + read(resumed, 100), everything)
            finally:
                resumed.close()

        return "; ".join(
            f"mp_prefetch 2 -> {count}: {_trial(lambda c=count: resume(c))}" for count in (2, 3)
        )

    def world() -> str:
        from grain.experimental import ElasticIterator

        def elastic(rank: int, world: int) -> Any:
            shard = grain.sharding.ShardOptions(shard_index=rank, shard_count=world)
            return ElasticIterator(mixed(), global_batch_size=12, shard_options=shard)

        def batches(iterator: Any, count: int | None = None) -> list[int]:
            return [int(x) for batch in itertools.islice(iterator, count) for x in batch]

        whole = batches(elastic(0, 1))
        reads, states = [], []
        for rank in range(2):
            ranked = elastic(rank, 2)
            reads += batches(ranked, 10)
            states.append(ranked.get_state())
        for rank in range(3):
            ranked = elastic(rank, 3)
            ranked.set_state(states[0])
            reads += batches(ranked)
        return "ElasticIterator 2 -> 3 shards: " + damage(reads, set(whole))

    def reweight() -> str:
        saved = iter(mixed().to_iter_dataset())
        first = read(saved, 100)
        resumed = iter(mixed(NEW_WEIGHTS).to_iter_dataset())
        resumed.set_state(saved.get_state())
        by_index = damage(first + read(resumed, 100))

        def keyed(weights: Sequence[float]) -> Any:
            parts = {n: ds.to_iter_dataset() for n, ds in zip(NAMES, sources(), strict=True)}
            return grain.IterDataset.mix(parts, dict(zip(NAMES, weights, strict=True)))

        saved = iter(keyed(WEIGHTS))
        first = read(saved, 100)
        resumed = iter(keyed(NEW_WEIGHTS))
        resumed.set_state(saved.get_state())
        by_key = damage(first + read(resumed, 100))
        return f"MapDataset.mix: {by_index}; IterDataset.mix by key: {by_key}"

    return {
        "num_workers": _trial(workers),
        "world size": _trial(world),
        "weights": _trial(reweight),
    }


def resume_trials() -> dict[str, dict[str, str]]:
    trials = {
        "flowloader": flowloader_trials,
        "torchdata.nodes": torchdata_trials,
        "HF datasets": hf_trials,
        "Grain": grain_trials,
    }
    found = {}
    for library, run in trials.items():
        if not installed(library):
            found[library] = {"skipped": f"{PEERS[library]} is not installed"}
            continue
        print(f"resume: {library}", file=sys.stderr, flush=True)
        try:
            found[library] = run()
        except Exception as error:
            found[library] = {"failed": failure_text(error)}
    return found
