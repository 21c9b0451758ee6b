"""flowloader.Mixture's arithmetic: proportions within 2 at every prefix of every stage, each
source read as a permutation per pass, stages that continue every source where it was, the
stopping rules, the batch path, and a clear error for every bad argument."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flowloader as fl
from flowloader.mixture.interleave import UNITS, Interleave
from flowloader.mixture.schedule import to_units

DERANDOMIZED = settings(
    max_examples=60, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def sources_of(sizes: list[int]) -> dict[str, np.ndarray]:
    """Sources whose samples say where they come from: source k's sample j is k * 10**6 + j."""
    return {f"s{k}": np.arange(n) + k * 10**6 for k, n in enumerate(sizes)}


def max_prefix_deviation(sources: np.ndarray, weights: list[float]) -> float:
    """The largest |count_s(N) - N·w_s| over every prefix N and source s."""
    n = np.arange(1, len(sources) + 1)
    worst = 0.0
    for s, w in enumerate(weights):
        counts = np.cumsum(sources == s)
        worst = max(worst, float(np.max(np.abs(counts - n * w))))
    return worst


weight_lists = st.lists(
    st.one_of(st.floats(1e-3, 1.0), st.just(1e-3), st.just(0.0)), min_size=1, max_size=12
).filter(lambda w: sum(w) > 0)


@DERANDOMIZED
@given(weights=weight_lists)
def test_every_prefix_is_within_two_of_its_share(weights: list[float]) -> None:
    total = math.fsum(weights)
    mix = fl.Mixture(sources_of([50] * len(weights)), weights, stopping="never", num_samples=20_000)
    sources, _ = mix.locate_many(np.arange(len(mix)))
    assert max_prefix_deviation(sources, [w / total for w in weights]) < 2


@pytest.mark.parametrize("count", [2, 10, 50])
def test_a_million_positions_with_weights_down_to_a_thousandth(count: int) -> None:
    weights = [1e-3] + [float(k + 1) ** -1.1 for k in range(count - 1)]
    total = math.fsum(weights)
    mix = fl.Mixture(sources_of([1000] * count), weights, stopping="never", num_samples=10**6)
    sources = mix.sources_of(np.arange(10**6))
    assert max_prefix_deviation(sources, [w / total for w in weights]) < 2


@DERANDOMIZED
@given(
    units=st.lists(st.integers(0, 1000), min_size=1, max_size=9).filter(lambda u: sum(u) > 0),
    start=st.integers(0, 5000),
)
def test_the_tree_s_counts_ranks_and_inverse_agree(units: list[int], start: int) -> None:
    tree = Interleave.build(list(to_units([u / sum(units) for u in units])))
    positions = np.arange(start, start + 400)
    sources, ranks = tree.locate(positions)
    before = tree.counts(start)
    for position, s, rank in zip(positions.tolist(), sources.tolist(), ranks.tolist(), strict=True):
        assert rank == before.get(s, 0)
        assert tree.position_of(s, rank) == position
        before[s] = rank + 1
    assert tree.counts(start + 400) == {s: n for s, n in before.items() if n or s in tree.paths}


def test_units_sum_exactly_and_keep_tiny_weights() -> None:
    units = to_units([0.5, 0.5 - 1e-12, 1e-12, 0.0])
    assert sum(units) == UNITS
    assert units[2:] == (1, 0)


@pytest.mark.parametrize("shuffle", [True, False])
def test_never_stopping_reads_every_source_whole_pass_after_pass(shuffle: bool) -> None:
    mix = fl.Mixture(
        sources_of([7, 30, 101]),
        [0.2, 0.3, 0.5],
        shuffle=shuffle,
        stopping="never",
        num_samples=2000,
    )
    sources, indices = mix.locate_many(np.arange(len(mix)))
    for s, n in enumerate([7, 30, 101]):
        read = indices[sources == s]
        passes = [read[k : k + n] for k in range(0, len(read) - n + 1, n)]
        for p in passes:
            assert sorted(p.tolist()) == list(range(n))
        if shuffle and n > 6:
            assert passes[0].tolist() != passes[1].tolist()
        elif not shuffle:
            assert passes[0].tolist() == list(range(n))


def test_first_exhausted_ends_where_a_source_would_start_over() -> None:
    mix = fl.Mixture(sources_of([100, 37, 10]), [0.5, 0.3, 0.2])
    counts = mix.counts()
    assert counts["s2"] == 10 or counts["s1"] == 37 or counts["s0"] == 100
    assert all(counts[name] <= n for name, n in zip(mix.names, [100, 37, 10], strict=True))
    longer = fl.Mixture(
        sources_of([100, 37, 10]), [0.5, 0.3, 0.2], stopping="never", num_samples=len(mix) + 1
    )
    over = longer.counts()
    assert any(over[name] > n for name, n in zip(mix.names, [100, 37, 10], strict=True))


def test_all_exhausted_reads_every_source_whole_at_least_once() -> None:
    mix = fl.Mixture(sources_of([100, 37, 10]), [0.5, 0.3, 0.2], stopping="all_exhausted")
    sources, indices = mix.locate_many(np.arange(len(mix)))
    for s, n in enumerate([100, 37, 10]):
        assert set(indices[sources == s].tolist()) == set(range(n))
    assert mix.counts()["s0"] == 100  # the last source to finish ends the mixture with it
    assert mix.counts(len(mix) - 1)["s0"] == 99


def test_num_samples_caps_the_other_stopping_rules() -> None:
    assert len(fl.Mixture(sources_of([100, 100]), [1, 1], num_samples=17)) == 17


def test_a_stage_change_continues_every_source_where_it_was() -> None:
    schedule = [(0, [0.7, 0.3, 0.0]), (1000, [0.1, 0.1, 0.8]), (1500, [0.5, 0.0, 0.5])]
    mix = fl.Mixture(sources_of([400, 400, 400]), schedule, stopping="never", num_samples=2500)
    sources, indices = mix.locate_many(np.arange(len(mix)))
    for s in range(3):  # each source's samples: one pass, then the next, never a repeat
        read = indices[sources == s][:400]
        assert len(set(read.tolist())) == len(read)
    for start, end, weights in [
        (0, 1000, [0.7, 0.3, 0]),
        (1000, 1500, [0.1, 0.1, 0.8]),
        (1500, 2500, [0.5, 0, 0.5]),
    ]:
        assert max_prefix_deviation(sources[start:end], weights) < 2
    assert mix.counts(1000)["s2"] == 0


def test_samples_and_their_sources() -> None:
    data = sources_of([20, 20])
    mix = fl.Mixture(data, {"s0": 1, "s1": 3}, seed=4)
    for i in range(len(mix)):
        name, inner = mix.locate(i)
        assert mix[i] == data[name][inner]
    assert mix.__getitems__([0, 5, 3]) == [mix[0], mix[5], mix[3]]
    with pytest.raises(IndexError, match="out of range"):
        mix[len(mix)]


def test_the_seed_changes_the_samples_not_the_sources() -> None:
    one = fl.Mixture(sources_of([50, 50]), [1, 1], seed=1)
    two = fl.Mixture(sources_of([50, 50]), [1, 1], seed=2)
    positions = np.arange(len(one))
    assert one.sources_of(positions).tolist() == two.sources_of(positions).tolist()
    assert one.locate_many(positions)[1].tolist() != two.locate_many(positions)[1].tolist()


class Batched:
    """A source with its own batch path, which records what it was asked for."""

    def __init__(self, n: int) -> None:
        self.n, self.calls = n, []

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return -i

    def __getitems__(self, indices: list[int]) -> list[int]:
        self.calls.append(list(indices))
        return [-i for i in indices]


def test_a_source_with_a_batch_path_gets_its_part_of_each_batch_whole() -> None:
    batched = Batched(100)
    mix = fl.Mixture({"batched": batched, "plain": list(range(100))}, [1, 1])
    batch = next(iter(fl.DataLoader(mix, batch_size=10, collate_fn=list)))
    assert [len(call) for call in batched.calls] == [5]
    assert batch == [mix[i] for i in range(10)]


def test_sources_may_be_a_list_and_weights_a_list() -> None:
    mix = fl.Mixture([list(range(10)), list(range(10))], [1, 1])
    assert mix.names == ("0", "1")


class Stream(fl.IterableDataset):
    def __iter__(self):
        return iter(range(3))


@pytest.mark.parametrize(
    ("sources", "weights", "error", "match"),
    [
        ({"a": [1], "b": [2]}, {"a": -1, "b": 1}, ValueError, "'a' is -1"),
        ({"a": [1], "b": [2]}, {"a": float("nan"), "b": 1}, ValueError, "'a' is nan"),
        ({"a": [1], "b": [2]}, {"a": 0, "b": 0}, ValueError, "every weight is 0"),
        ({"a": [1], "b": [2]}, {"a": 1}, ValueError, r"no weight for source\(s\) \['b'\]"),
        ({"a": [1], "b": [2]}, {"a": 1, "b": 1, "c": 1}, ValueError, "unknown source"),
        ({"a": [1], "b": [2]}, [1, 2, 3], ValueError, "3 weight"),
        ({"a": [1], "b": [2]}, [(5, [1, 1])], ValueError, "begin at position 0"),
        ({"a": [1], "b": [2]}, [(0, [1, 1]), (0, [1, 2])], ValueError, "must increase"),
        ({"a": [1], "b": [2]}, [(0, {"a": 1, "x": 1})], ValueError, "unknown source"),
        ({"a": [], "b": [2]}, [1, 1], ValueError, "'a' is empty"),
        ({"a": Stream(), "b": [2]}, [1, 1], TypeError, "not a map-style dataset"),
        ({"a": [1], "b": [2]}, "web", TypeError, "weights must be"),
        ({"a": [1], "b": [2]}, {"a": "1", "b": 1}, TypeError, "not a number"),
    ],
)
def test_bad_input_gets_an_error_naming_what_is_wrong(sources, weights, error, match) -> None:
    with pytest.raises(error, match=match):
        fl.Mixture(sources, weights)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"stopping": "never"}, "needs num_samples"),
        ({"stopping": "sometimes"}, "stopping should be one of"),
        ({"num_samples": -1}, "non-negative"),
        ({"stopping": "all_exhausted", "weights": [(0, [1, 1]), (5, [1, 0])]}, "never read"),
    ],
)
def test_bad_options(options: dict, match: str) -> None:
    weights = options.pop("weights", [1, 1])
    with pytest.raises(ValueError, match=match):
        fl.Mixture({"a": list(range(10)), "b": list(range(10))}, weights, **options)


def test_a_plan_for_a_thousand_sources_and_a_billion_samples_is_arithmetic() -> None:
    sources = {f"s{k}": range(10**6 + k) for k in range(1000)}
    mix = fl.Mixture(
        sources, [1 / (k + 1) for k in range(1000)], stopping="never", num_samples=10**9
    )
    assert len(mix) == 10**9
    names, inner = mix.locate_many(np.arange(10**9 - 256, 10**9))
    assert ((inner >= 0) & (inner < np.asarray(mix.source_lengths)[names])).all()


@pytest.mark.parametrize("drop_last", [False, True])
def test_batches_from_one_source_each_in_proportion_at_every_prefix(drop_last: bool) -> None:
    weights = [0.6, 0.25, 0.1, 0.05]
    mix = fl.Mixture(sources_of([5000, 3000, 900, 700]), weights, stopping="all_exhausted")
    sampler = fl.MixtureBatchSampler(mix, 16, drop_last=drop_last)
    batches = list(sampler)
    assert len(batches) == len(sampler)
    per_batch = np.array([mix.sources_of(batch)[0] for batch in batches])
    for batch, source in zip(batches, per_batch, strict=True):
        assert set(mix.sources_of(batch).tolist()) == {source}
        assert len(batch) == 16 or not drop_last
    positions = [p for batch in batches for p in batch]
    assert len(positions) == len(set(positions))
    assert max_prefix_deviation(per_batch, weights) < 2


def test_a_batch_sampler_over_a_schedule_moves_its_stages_to_batch_boundaries() -> None:
    mix = fl.Mixture(
        sources_of([400, 400]), [(0, [1, 0]), (100, [0, 1])], stopping="never", num_samples=300
    )
    sources = [int(mix.sources_of(b)[0]) for b in fl.MixtureBatchSampler(mix, 8)]
    assert sources[:13] == [0] * 13  # 100 samples of the first stage: 13 batches of 8
    assert set(sources[13:]) == {1}


def test_a_batch_sampler_needs_a_mixture_and_a_batch_size() -> None:
    mix = fl.Mixture(sources_of([10, 10]), [1, 1])
    with pytest.raises(ValueError, match="positive integer"):
        fl.MixtureBatchSampler(mix, 0)
    with pytest.raises(TypeError, match=r"takes a flowloader\.Mixture"):
        fl.MixtureBatchSampler(list(range(10)), 2)


class Stacked:
    """A source whose batch path stacks its rows into ``allocate`` (as the vision datasets'
    does), and records the places it was asked for and the arrays it wrote into."""

    def __init__(self, n: int, offset: int) -> None:
        self.n, self.offset, self.calls, self.outputs = n, offset, [], []

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return np.full(3, i + self.offset, dtype=np.float32), i

    def __getitems__(self, indices: list[int], allocate=None):
        self.calls.append(list(indices))
        rows = allocate((len(indices), 3), np.float32)
        rows[...] = np.asarray(indices, dtype=np.float32)[:, None] + self.offset
        self.outputs.append(rows)
        labels = np.asarray(indices)
        return fl.batching.CollatedSamples((rows, labels), lambda k: (rows[k], int(labels[k])))


def test_sources_that_stack_into_allocate_write_the_batch_in_place() -> None:
    a, b = Stacked(100, 0), Stacked(100, 1000)
    plain = [(np.full(3, -k, dtype=np.float32), k) for k in range(100)]
    mix = fl.Mixture({"a": a, "b": b, "plain": plain}, [2, 1, 1])
    batch_memory = []

    def allocate(shape, dtype):
        batch_memory.append(np.empty(shape, dtype))
        return batch_memory[-1]

    indices = list(range(40, 56))
    got = mix.__getitems__(indices, allocate=allocate)
    expected = [mix[i] for i in indices]
    assert len(got) == len(expected)  # a plain source's samples make it a list of samples
    for sample, want in zip(got, expected, strict=True):
        np.testing.assert_array_equal(sample[0], want[0])
        assert sample[1] == want[1]
    sources = mix.sources_of(indices)
    runs_of_a = np.split(
        np.flatnonzero(sources == 0), np.flatnonzero(np.diff(np.flatnonzero(sources == 0)) != 1) + 1
    )
    assert len(a.calls) == len(runs_of_a)  # one call per run of consecutive places

    stacked_only = fl.Mixture({"a": a, "b": b}, [2, 1])
    a.outputs.clear()
    batch_memory.clear()
    images, labels = fl.batching.CollatedSamples.collated(
        stacked_only.__getitems__(indices, allocate=allocate)
    )
    assert all(np.shares_memory(out, batch_memory[0]) for out in a.outputs)  # no copy
    for k, i in enumerate(indices):
        np.testing.assert_array_equal(images[k], stacked_only[i][0])
        assert labels[k] == stacked_only[i][1]


def test_a_subclass_s_own_getitem_runs_on_the_batch_path() -> None:
    class Doubled(fl.Mixture):
        def __getitem__(self, index):
            return 2 * super().__getitem__(index)

    mix = Doubled(sources_of([10, 10]), [1, 1])
    batch = next(iter(fl.DataLoader(mix, batch_size=4)))
    assert batch.tolist() == [2 * fl.Mixture(sources_of([10, 10]), [1, 1])[i] for i in range(4)]


def test_a_tiny_weight_far_past_int64_does_not_shorten_the_mixture() -> None:
    big = 2**40
    mix = fl.Mixture({"tiny": range(big), "main": range(big)}, [1e-12, 1.0])
    assert len(mix) > big - 10  # ends where "main" is read whole, not at an overflow


def test_all_exhausted_passes_over_an_empty_source_without_weight() -> None:
    mix = fl.Mixture({"a": list(range(10)), "e": []}, [1, 0], stopping="all_exhausted")
    assert len(mix) == 10


def test_numpy_numbers_and_arrays_are_weights_starts_and_sizes() -> None:
    two = {"a": list(range(20)), "b": list(range(20))}
    schedule = [(np.int64(0), np.array([1.0, 1.0])), (np.int64(6), np.array([1.0, 0.0]))]
    mix = fl.Mixture(two, schedule, seed=np.int64(2), num_samples=np.int64(9), stopping="never")
    assert len(mix) == 9
    assert [s.start for s in mix.stages] == [0, 6]
    assert fl.Mixture(two, {"a": np.int64(1), "b": np.float32(3)}).counts()["b"] > 0
