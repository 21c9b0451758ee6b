"""Tables through the loader: the same batches for any worker count and method, each row
group decoded once per epoch under BlockShuffleSampler, and a `datasets.Dataset` as a
source. (Remote tables: tests/unit/tables/test_remote_tables.py; fsspec keeps an event loop
thread for the process, which this folder's descriptor check would count.)"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import flowloader as fl

pq = pytest.importorskip(
    "pyarrow.parquet", reason="needs pyarrow (pip install 'flowloader[tables]')"
)
from flowloader.tables import ParquetDataset  # noqa: E402

from ..unit.tables.conftest import write_parquet_file  # noqa: E402

COLUMNS = ["id", "score", "text", "vec"]  # what default_collate stacks (tokens are ragged)


@pytest.fixture
def parquet_file(tmp_path):
    return write_parquet_file(tmp_path)


def epoch(loader) -> list:
    return [(b["id"].tolist(), b["text"], b["vec"].tolist()) for b in loader]


def test_the_same_batches_for_any_workers_and_method(parquet_file) -> None:
    ds = ParquetDataset(parquet_file, columns=COLUMNS)

    def run(**options) -> list:
        sampler = fl.BlockShuffleSampler(ds, window=3, seed=4)
        loader = fl.DataLoader(ds, batch_size=32, sampler=sampler, **options)
        return epoch(loader) + epoch(loader)

    expected = run()
    assert sorted(i for ids, _, _ in expected[: len(expected) // 2] for i in ids) == list(
        range(1200)
    )
    assert run(num_workers=2) == expected
    assert run(num_workers=3, worker_method="thread") == expected
    shuffled = fl.DataLoader(ds, batch_size=50, shuffle=True, generator=1)
    assert epoch(fl.DataLoader(ds, batch_size=50, shuffle=True, generator=1, num_workers=2)) == (
        epoch(shuffled)
    )


def test_block_shuffle_decodes_each_row_group_once_per_epoch(parquet_file) -> None:
    ds = ParquetDataset(parquet_file, columns=COLUMNS, cache_bytes=4 * (1 << 20))
    loader = fl.DataLoader(ds, batch_size=32, sampler=fl.BlockShuffleSampler(ds, window=4))
    for count in (1, 2):
        epoch(loader)
        assert ds.decoded_blocks <= 12 * count + 4  # the window left in the cache, at most


def test_a_datasets_dataset_is_a_source_as_it_is() -> None:
    datasets = pytest.importorskip("datasets")
    hf = datasets.Dataset.from_dict({"x": list(range(100)), "y": [i * 2.0 for i in range(100)]})
    loader = fl.DataLoader(hf, batch_size=10, shuffle=True, generator=0, num_workers=2)
    batches = list(loader)
    assert sorted(int(x) for b in batches for x in b["x"]) == list(range(100))
    assert all(np.array_equal(b["y"], b["x"] * 2.0) for b in batches)


def test_a_batch_comes_collated_as_default_collate_would_stack_its_rows(parquet_file) -> None:
    """A table hands default_collate its gathered columns; the batch is the one the rows
    would give, value for value and type for type, and other collate_fns see dict rows."""
    from flowloader.batching import CollatedRecords
    from flowloader.collate import default_collate

    ds = ParquetDataset(parquet_file, columns=["id", "score", "text", "vec", "blob"])
    indices = [1100, 3, 3, 650, 101, 0]
    got = ds.__getitems__(indices)
    assert isinstance(got, CollatedRecords)
    rows = [got[k] for k in range(len(indices))]
    assert [row["id"] for row in rows] == indices
    fast, slow = default_collate(got), default_collate(rows)
    assert list(fast) == list(slow) == ["id", "score", "text", "vec", "blob"]
    for name in fast:
        assert type(fast[name]) is type(slow[name]), name
        if isinstance(slow[name], np.ndarray):
            assert fast[name].dtype == slow[name].dtype, name
            np.testing.assert_array_equal(fast[name], slow[name])
        else:
            assert fast[name] == slow[name], name
    nulls = ParquetDataset(parquet_file, columns=["id", "maybe"]).__getitems__([0, 1])
    assert isinstance(nulls, list)  # a null: the rows, for default_collate to name it
    loader = fl.DataLoader(ds, batch_size=4, collate_fn=lambda batch: [r["id"] for r in batch])
    assert next(iter(loader)) == [0, 1, 2, 3]


def test_a_mixture_of_tables(parquet_file, tmp_path) -> None:
    import pyarrow as pa

    from flowloader.tables import ArrowDataset

    from ..unit.tables.conftest import table

    more = table(300, offset=5000)
    with (
        pa.OSFile(str(tmp_path / "more.arrow"), "wb") as sink,
        pa.ipc.new_file(sink, more.schema) as writer,
    ):
        writer.write_table(more, max_chunksize=64)
    parquet = ParquetDataset(parquet_file, columns=COLUMNS)
    arrow = ArrowDataset(str(tmp_path / "more.arrow"), columns=COLUMNS)
    mix = fl.Mixture({"parquet": parquet, "arrow": arrow}, {"parquet": 3, "arrow": 1}, seed=2)

    def run(**options) -> list:
        return epoch(fl.DataLoader(mix, batch_size=40, **options))

    expected = run()
    ids = [i for batch_ids, _, _ in expected for i in batch_ids]
    assert len(ids) == len(mix)
    from_arrow = [i for i in ids if i >= 5000]
    assert len(set(from_arrow)) == len(from_arrow)  # no row twice within a pass
    assert abs(len(from_arrow) / len(ids) - 0.25) < 0.01
    assert run(num_workers=2) == expected
    assert run(num_workers=2, worker_method="thread") == expected


def test_packed_over_a_tokenized_table_mixed_with_a_token_file(tmp_path) -> None:
    """A table's token column (``columns`` as one name: rows are its arrays, ``lengths``
    read from the list offsets) packs as token files do, alone and in a Mixture with one."""
    import pyarrow as pa

    from flowloader.text import Packed, TokenDataset, write_tokens

    table_docs = [np.arange(1 + i % 11, dtype=np.uint16) + 1 for i in range(240)]
    file_docs = [np.full(1 + i % 7, 5000 + i, dtype=np.uint16) for i in range(90)]
    tokens = pa.array(table_docs, pa.list_(pa.uint16()))
    pq.write_table(pa.table({"input_ids": tokens}), tmp_path / "t.parquet", row_group_size=40)
    table = ParquetDataset(tmp_path / "t.parquet", columns="input_ids")
    assert table.lengths.tolist() == [len(doc) for doc in table_docs]
    np.testing.assert_array_equal(table[17], table_docs[17])
    token_file = TokenDataset(write_tokens(file_docs, tmp_path / "f.bin"))

    alone = Packed(table, 24, block=64)
    assert alone.audit()["tokens"] == sum(len(doc) for doc in table_docs)
    mix = fl.Mixture({"table": table, "file": token_file}, {"table": 2, "file": 1}, seed=3)
    packed = Packed(mix, 24, block=32, shuffle=True, seed=1)
    packed.audit()

    def run(**options) -> list:
        loader = fl.DataLoader(packed, batch_size=8, **options)
        return [batch["tokens"].tolist() for batch in loader]

    expected = run()
    flat = [t for batch in expected for row in batch for t in row if t]
    from_file = sorted(t for t in flat if t >= 5000)
    assert from_file == sorted(t for doc in file_docs for t in doc.tolist())
    assert run(num_workers=2) == expected
    assert run(num_workers=2, worker_method="thread") == expected


def test_a_hundred_random_resume_points_are_exact(parquet_file) -> None:
    """A real table under BlockShuffleSampler or a full shuffle, cut at 100 random batches
    of two epochs (a random loader before and after: 0-3 workers, threads, one cut in ten
    onto processes): the batches are those of the uninterrupted run."""
    import json
    import random

    ds = ParquetDataset(parquet_file, columns="id")

    def loader(block_shuffled: bool, workers: int, method: str) -> fl.DataLoader:
        options = {"num_workers": workers, "worker_method": method}
        if block_shuffled:
            sampler = fl.BlockShuffleSampler(ds, window=3, seed=8)
            return fl.DataLoader(ds, batch_size=50, sampler=sampler, **options)
        return fl.DataLoader(ds, batch_size=50, shuffle=True, generator=8, **options)

    def ids(batch) -> list[int]:
        return [int(i) for i in batch]

    def two_epochs(reference: fl.DataLoader) -> list[list[int]]:
        return [ids(b) for _ in range(2) for b in reference]

    full = {kind: two_epochs(loader(kind, 0, "thread")) for kind in (True, False)}
    assert sorted(i for b in full[True][:24] for i in b) == list(range(1200))
    assert full[True][:24] != full[True][24:], "the second epoch reshuffles"
    draw = random.Random(20261204)
    for point in range(100):
        kind = draw.random() < 0.7
        method = "multiprocessing" if point % 10 == 0 else "thread"
        cut = draw.randrange(1, len(full[kind]))
        first = loader(kind, draw.randrange(4), method)
        got: list[list[int]] = []
        while len(got) < cut:
            for batch in first:
                got.append(ids(batch))
                if len(got) == cut:
                    break
        state = json.loads(json.dumps(first.state_dict()))
        second = loader(kind, draw.randrange(4), "thread")
        second.load_state_dict(state)
        while len(got) < len(full[kind]):
            got += [ids(batch) for batch in second]
        assert got == full[kind], f"cut at batch {cut} of {len(full[kind])}"


@pytest.mark.parametrize("sampler", ["sequence", "block shuffle"])
def test_four_thread_workers_decode_each_row_group_once_per_epoch(parquet_file, sampler) -> None:
    """Thread workers share their table's cache (one per process): 4 of them decode each
    row group once per epoch, counted per row group, with a cache of 6 of the 12 (the main
    process's one read, measuring a block for the loader's cache warning, aside).

    Once, not exactly: a thread the machine stalls falls behind the others by up to the
    prefetch budget (round robin hands it its next batches meanwhile), and where the batches
    between span more row groups than the cache holds, one it still needs ages out and is
    read again (CI's busy machine read 2 of 12 twice). Before the cache was shared, each
    thread decoded every row group it met."""
    probe = ParquetDataset(parquet_file, columns=COLUMNS, cache_bytes=1)  # a block at a time
    charges = []
    for block, first_row in enumerate(probe._block_starts[:-1]):
        probe[int(first_row)]
        charges.append(probe._cache.charge_of(block))
    assert len(charges) == 12
    ds = ParquetDataset(parquet_file, columns=COLUMNS, cache_bytes=6 * max(charges))
    reads: list[int] = []
    read_block = ds._read_block

    def counted(block: int) -> Any:  # shared by copies; the workers' reads only
        if threading.current_thread() is not threading.main_thread():
            reads.append(block)
        return read_block(block)

    ds._read_block = counted
    order = (
        fl.BlockShuffleSampler(ds, window=2, seed=1, num_replicas=1, rank=0)
        if sampler == "block shuffle"
        else None
    )
    loader = fl.DataLoader(
        ds, batch_size=25, sampler=order, num_workers=4, worker_method="thread", prefetch_factor=1
    )
    for number in range(2):
        reads.clear()
        ids = sorted(i for batch in loader for i in batch["id"].tolist())
        assert ids == list(range(1200))
        assert len(reads) - len(set(reads)) <= 2, f"epoch {number}: row groups read again: {reads}"
        if number == 0:
            assert sorted(set(reads)) == list(range(12))
    assert ds.decoded_blocks <= 28
    assert ds._cache.bytes <= ds.cache_bytes
