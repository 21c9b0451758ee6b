from __future__ import annotations

import pytest

from flowloader._fetch import IterableFetcher, MapFetcher, make_fetcher


class Recorder:
    def __init__(self, batched: bool) -> None:
        self.calls: list = []
        if batched:
            self.__getitems__ = self._getitems

    def __getitem__(self, i):
        self.calls.append(("item", i))
        return i * 10

    def _getitems(self, indices):
        self.calls.append(("items", list(indices)))
        return [i * 10 for i in indices]


def test_map_fetcher_uses_getitems_once_per_batch() -> None:
    ds = Recorder(batched=True)
    fetcher = MapFetcher(ds, auto_collation=True, collate_fn=list)
    assert fetcher.fetch([1, 2, 3]) == [10, 20, 30]
    assert ds.calls == [("items", [1, 2, 3])]


def test_map_fetcher_falls_back_to_getitem() -> None:
    ds = Recorder(batched=False)
    assert MapFetcher(ds, True, list).fetch([4, 5]) == [40, 50]
    assert ds.calls == [("item", 4), ("item", 5)]


def test_map_fetcher_without_auto_collation_fetches_one_index() -> None:
    ds = Recorder(batched=True)
    assert MapFetcher(ds, False, lambda x: x + 1).fetch(3) == 31
    assert ds.calls == [("item", 3)]


def test_iterable_fetcher_batches_and_keeps_short_tail() -> None:
    fetcher = IterableFetcher(range(5), True, list, drop_last=False)
    assert fetcher.fetch([None] * 2) == [0, 1]
    assert fetcher.fetch([None] * 2) == [2, 3]
    assert fetcher.fetch([None] * 2) == [4]
    with pytest.raises(StopIteration):
        fetcher.fetch([None] * 2)


def test_iterable_fetcher_drops_short_tail() -> None:
    fetcher = IterableFetcher(range(5), True, list, drop_last=True)
    assert fetcher.fetch([None] * 3) == [0, 1, 2]
    with pytest.raises(StopIteration):
        fetcher.fetch([None] * 3)


def test_iterable_fetcher_single_samples() -> None:
    fetcher = make_fetcher(iter("ab"), True, False, str.upper, False)
    assert isinstance(fetcher, IterableFetcher)
    assert [fetcher.fetch(None), fetcher.fetch(None)] == ["A", "B"]
    with pytest.raises(StopIteration):
        fetcher.fetch(None)


def test_a_collate_fn_of_the_user_s_draws_from_the_batch_s_generator() -> None:
    from flowloader.batching import batch_generator, batch_rng
    from flowloader.collate import default_collate
    from flowloader.randomness import SampleSeeds

    def drawing(samples):
        generator = batch_rng()
        return samples, None if generator is None else generator.random()

    seeds = SampleSeeds(7)
    want = batch_generator(7, 3).random()
    assert MapFetcher(Recorder(True), True, drawing).fetch([1, 2], seeds, None, 3)[1] == want
    assert MapFetcher(Recorder(False), True, drawing).fetch([1, 2], seeds, None, 3)[1] == want
    stream = IterableFetcher(range(10), True, drawing, drop_last=False)
    assert stream.fetch([None, None], seeds, None, 3) == ([0, 1], want)
    single = IterableFetcher(range(10), False, drawing, drop_last=False)
    assert single.fetch(None, seeds, None, 3) == (0, want)
    # without a number (or seeds) there is no batch generator; default_collate draws nothing
    assert MapFetcher(Recorder(True), True, drawing).fetch([1], seeds)[1] is None
    assert MapFetcher(Recorder(True), True, drawing).fetch([1], None, None, 3)[1] is None
    assert MapFetcher(Recorder(True), True, default_collate).fetch(
        [1], seeds, None, 3
    ).tolist() == [10]
    assert batch_rng() is None
