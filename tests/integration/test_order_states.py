"""The order contract in the states a user reaches (review wave 5: R1, R2, R6, R9, R13, R14).

An end-of-epoch checkpoint resumes into the next epoch; a sampler setting changed after
something was read is refused by name; a Mixture asks its sources; a grown table is refused
after a short last batch; a state from another seed never mixes two block orders.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import flowloader as fl
from flowloader.text import Packed
from flowloader.video import ClipSampler

N = 32


class FakeClips:
    """What ClipSampler reads of a VideoClips: clips per video and each video's first."""

    clips_per_video = np.array([5, 9, 3, 7, 8])
    clip_starts = np.concatenate([[0], np.cumsum(clips_per_video)])

    def __len__(self) -> int:
        return int(self.clip_starts[-1])


def sampler_loader(kind: str, **settings) -> fl.DataLoader:
    if kind == "clips":
        sampler = ClipSampler(FakeClips(), clips_per_video=2, num_replicas=1, rank=0, **settings)
    elif kind == "blocks":
        sampler = fl.BlockShuffleSampler(N, block_size=4, num_replicas=1, rank=0, **settings)
    else:
        sampler = fl.DistributedSampler(np.arange(N), num_replicas=1, rank=0, **settings)
    return fl.DataLoader(np.arange(N), batch_size=4, sampler=sampler)


def flat(loader) -> list[int]:
    return [i for batch in loader for i in batch.tolist()]


@pytest.mark.parametrize("kind", ["distributed", "blocks", "clips"])
@pytest.mark.parametrize("user_sets_epoch", [False, True])
def test_an_end_of_epoch_state_resumes_into_the_next_epoch(kind, user_sets_epoch) -> None:
    """R14: the state taken after the last batch (Lightning's epoch-end checkpoint) gives the
    uninterrupted run's next epoch, also where the loop calls set_epoch itself."""
    loader = sampler_loader(kind, seed=5)
    epochs = []
    for epoch in range(2):
        if user_sets_epoch:
            loader.sampler.set_epoch(epoch)
        epochs.append(flat(loader))
    state = loader.state_dict()
    assert state["epoch"] == 2
    assert state["sampler"]["epoch"] == 2
    if user_sets_epoch:
        loader.sampler.set_epoch(2)
    expected = flat(loader)
    assert expected not in epochs
    resumed = sampler_loader(kind, seed=5)
    resumed.load_state_dict(state)
    assert flat(resumed) == expected


def test_a_state_taken_after_stop_iteration_and_before_the_next_iter_agree() -> None:
    loader = sampler_loader("distributed", seed=1)
    iterator = iter(loader)
    flat(iterator)
    after_stop = loader.state_dict()
    assert after_stop == loader.state_dict()  # asking twice changes nothing
    expected = flat(loader)
    resumed = sampler_loader("distributed", seed=1)
    resumed.load_state_dict(after_stop)
    assert flat(resumed) == expected


def documents() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 60, size=400)
    return [rng.integers(1, 1000, size=int(n)).astype(np.int32) for n in lengths]


def test_an_end_of_epoch_state_over_shuffled_packed_rows_resumes() -> None:
    """R1: Packed(shuffle=True) has another row count in each epoch; the state between
    epochs describes the next one, so it is accepted and exact."""
    docs = documents()

    def make() -> fl.DataLoader:
        packed = Packed(docs, seq_len=64, block=16, shuffle=True, seed=3)
        return fl.DataLoader(packed, batch_size=4, shuffle=True, generator=7)

    loader = make()
    for _ in loader:
        pass
    state = loader.state_dict()
    expected = [b["tokens"].copy() for b in loader]
    resumed = make()
    resumed.load_state_dict(state)
    got = [b["tokens"].copy() for b in resumed]
    assert len(got) == len(expected)
    assert all(np.array_equal(a, b) for a, b in zip(got, expected, strict=True))


def test_a_block_order_follows_the_seed_a_state_restores() -> None:
    """R2: a loader that iterated under seed 1, then loads a state saved under seed 0,
    continues seed 0's order exactly (its cached block order is not reused)."""

    def loader(seed: int) -> fl.DataLoader:
        options = {"block_size": 8, "window": 2, "num_replicas": 1, "rank": 0}
        sampler = fl.BlockShuffleSampler(64, seed=seed, **options)
        return fl.DataLoader(np.arange(64), batch_size=4, sampler=sampler)

    run = loader(seed=0)
    iterator = iter(run)
    for _ in range(5):
        next(iterator)
    state = run.state_dict()
    rest = flat(iterator)
    other = loader(seed=1)
    next(iter(other))
    other.load_state_dict(state)
    assert flat(other) == rest


@pytest.mark.parametrize("kind", ["distributed", "blocks", "clips"])
def test_shuffle_changed_after_something_was_read_is_refused_by_name(kind) -> None:
    """R9: rows would come twice and never; refused, naming the setting. Before anything of
    the epoch is read, the same change is accepted and every row comes once."""
    run = sampler_loader(kind, shuffle=True)
    untouched = run.state_dict()
    iterator = iter(run)
    for _ in range(3):
        next(iterator)
    with pytest.raises(ValueError, match="sampler shuffle: saved True, this loader False"):
        sampler_loader(kind, shuffle=False).load_state_dict(run.state_dict())
    fresh = sampler_loader(kind, shuffle=False)
    fresh.load_state_dict(untouched)
    assert flat(fresh) == flat(sampler_loader(kind, shuffle=False))


class Described(fl.Dataset):
    """A user's wrapper that forwards the order contract: not refused for its class name."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __getitem__(self, i: int) -> int:
        return i

    def __len__(self) -> int:
        return self.n

    def order_state(self) -> dict:
        return {"rows": self.n}

    def order_changes(self, saved: dict, read: fl.order.Read) -> list[str]:
        return [] if saved == self.order_state() else ["rows changed"]


class Renamed(Described):
    pass


def test_a_dataset_that_describes_itself_is_not_refused_for_its_class_name() -> None:
    run = fl.DataLoader(Described(20), batch_size=4)
    iterator = iter(run)
    next(iterator)
    resumed = fl.DataLoader(Renamed(20), batch_size=4)
    resumed.load_state_dict(run.state_dict())
    assert flat(resumed) == list(range(4, 20))


def write_table(path: str, values: np.ndarray) -> str:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"x": values}), path, row_group_size=10)
    return path


def test_a_table_changed_inside_a_mixture_is_refused(tmp_path) -> None:
    """R6: the Mixture asks its source through the contract, as a bare table is asked."""
    pytest.importorskip("pyarrow.parquet")
    from flowloader.tables import ParquetDataset

    a = write_table(str(tmp_path / "a.parquet"), np.arange(50))
    b = write_table(str(tmp_path / "b.parquet"), np.arange(1000, 1050))
    c = write_table(str(tmp_path / "c.parquet"), np.arange(5000, 5050))

    def mixed(files: list[str]) -> fl.DataLoader:
        sources = {"table": ParquetDataset(files, columns="x"), "ids": np.arange(-40, 0)}
        mix = fl.Mixture(sources, [0.5, 0.5], seed=0)
        return fl.DataLoader(mix, batch_size=4, shuffle=True, generator=0)

    run = mixed([a, b])
    iterator = iter(run)
    for _ in range(5):
        next(iterator)
    with pytest.raises(ValueError, match=r"source 'table': table file 1 was b\.parquet"):
        mixed([a, c]).load_state_dict(run.state_dict())
    same = mixed([a, b])
    same.load_state_dict(run.state_dict())
    assert flat(same) == flat(iterator)


def test_a_table_grown_after_a_short_last_batch_is_refused(tmp_path) -> None:
    """R13: the checkpoint at the last step of an epoch read [8, 9] as a short batch; rows
    10 and 11 would never come if a grown table were accepted."""
    pytest.importorskip("pyarrow.parquet")
    from flowloader.tables import ParquetDataset

    write_table(str(tmp_path / "part-0.parquet"), np.arange(10))
    loader = fl.DataLoader(ParquetDataset(str(tmp_path), columns="x"), batch_size=4)
    for _ in loader:
        state = loader.state_dict()
    assert state["batches_yielded"] == 3
    write_table(str(tmp_path / "part-1.parquet"), np.arange(10, 20))
    resumed = fl.DataLoader(ParquetDataset(str(tmp_path), columns="x"), batch_size=4)
    with pytest.raises(ValueError, match="held 10 items, now 20: the positions read reach 12"):
        resumed.load_state_dict(state)
    # after a full batch the same growth lies after what was read: accepted
    os.remove(tmp_path / "part-1.parquet")
    loader = fl.DataLoader(ParquetDataset(str(tmp_path), columns="x"), batch_size=5)
    iterator = iter(loader)
    next(iterator)
    state = loader.state_dict()
    write_table(str(tmp_path / "part-1.parquet"), np.arange(10, 20))
    grown = fl.DataLoader(ParquetDataset(str(tmp_path), columns="x"), batch_size=5)
    grown.load_state_dict(state)
    assert flat(grown) == list(range(5, 20))


def test_files_changed_sees_growth_below_the_prefix() -> None:
    """The rule every file-backed dataset shares (tables, video and audio lists)."""
    saved = (["a", "b"], [3, 4])
    grown = (["a", "b", "c"], [3, 4, 5])
    one = lambda count: count  # noqa: E731
    assert fl.order.files_changed(saved, grown, fl.order.Read(0, 7), one, "file", "rows") == []
    found = fl.order.files_changed(saved, grown, fl.order.Read(0, 8), one, "file", "rows")
    assert len(found) == 1
    assert "reach 8" in found[0]
    assert fl.order.files_changed(saved, grown, fl.order.Read(0, None), one, "file", "rows")


def test_a_batch_size_is_compared_where_the_loader_cannot_regroup() -> None:
    """A batch sampler of the user's own is compared by its settings (its batch size
    included); a stream's batches are its own, so a new batch size is refused mid-epoch."""

    def given(batch_size: int) -> fl.DataLoader:
        batches = fl.BatchSampler(fl.RandomSampler(np.arange(40)), batch_size, False)
        return fl.DataLoader(np.arange(40), batch_sampler=batches, generator=1)

    run = given(4)
    next(iter(run))
    with pytest.raises(ValueError, match="batch_sampler batch_size: saved 4, this loader 5"):
        given(5).load_state_dict(run.state_dict())

    class Stream(fl.IterableDataset):
        def __iter__(self):
            return iter(range(40))

    run = fl.DataLoader(Stream(), batch_size=4)
    next(iter(run))
    with pytest.raises(ValueError, match="batch_size: saved 4, this loader 5"):
        fl.DataLoader(Stream(), batch_size=5).load_state_dict(run.state_dict())
