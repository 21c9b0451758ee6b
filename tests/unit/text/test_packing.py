"""Packed rows: every token of every document in exactly one row, segment ids and positions
that describe the rows, rows within seq_len, the same rows through the loader for any worker
count and after a resume, and the varlen collate."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flowloader as fl
from flowloader.text import Packed, block_diagonal_mask, collate_packed

DERANDOMIZED = settings(
    max_examples=80, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def token_documents(lengths: list[int]) -> list[np.ndarray]:
    """Document d's tokens are d * 10_000 + position: every token says where it came from."""
    return [np.arange(n, dtype=np.int64) + d * 10_000 for d, n in enumerate(lengths)]


def unpack(row: dict[str, np.ndarray]) -> list[tuple[int, int]]:
    """(document, position in document) of every real token of a row, from its tokens."""
    real = row["segment_ids"] > 0
    return [(int(t) // 10_000, int(t) % 10_000) for t in row["tokens"][real]]


@DERANDOMIZED
@given(
    lengths=st.lists(st.integers(0, 1200), min_size=1, max_size=60),
    seq_len=st.sampled_from([16, 100, 512]),
    block=st.integers(1, 25),
    method=st.sampled_from(["best_fit", "first_fit"]),
)
def test_every_token_is_in_exactly_one_row(lengths, seq_len, block, method) -> None:
    docs = token_documents(lengths)
    packed = Packed(docs, seq_len, block=block, method=method)
    seen = []
    for r in range(len(packed)):
        row = packed[r]
        assert all(len(v) == seq_len for v in row.values())
        segments = row["segment_ids"]
        real = segments > 0
        assert not real[np.argmin(real) :].any() or real.all()  # padding only at the end
        assert (np.diff(segments[real]) >= 0).all()
        for segment in np.unique(segments[real]):
            at = segments == segment
            assert row["positions"][at].tolist() == list(range(int(at.sum())))
            tokens = row["tokens"][at]
            assert (np.diff(tokens) == 1).all()  # a piece is consecutive tokens of one document
        seen += unpack(row)
    expected = [(d, k) for d, n in enumerate(lengths) for k in range(n)]
    assert sorted(seen) == expected
    totals = packed.audit()
    assert totals["tokens"] == sum(lengths)
    assert totals["padding"] == len(packed) * seq_len - sum(lengths)


def test_best_fit_pads_less_than_first_fit() -> None:
    rng = np.random.default_rng(0)
    lengths = rng.lognormal(5.6, 0.7, size=4000).astype(int) + 1
    docs = token_documents(lengths.tolist())
    best = Packed(docs, 512).audit()
    first = Packed(docs, 512, method="first_fit").audit()
    assert best["padding"] < first["padding"]
    assert best["padding"] / (best["rows"] * 512) < 0.02


def test_long_documents_are_split_or_refused() -> None:
    docs = token_documents([10, 70, 5])
    packed = Packed(docs, 32)
    assert packed.audit()["tokens"] == 85
    with pytest.raises(ValueError, match="document 1 has 70 tokens, more than seq_len=32"):
        Packed(docs, 32, long_docs="error")


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"seq_len": 0}, "seq_len should be a positive int"),
        ({"block": 0}, "block should be a positive int"),
        ({"method": "greedy"}, "method should be one of"),
        ({"long_docs": "drop"}, "long_docs should be one of"),
    ],
)
def test_bad_options(options, match) -> None:
    arguments = {"seq_len": 16, **options}
    seq_len = arguments.pop("seq_len")
    with pytest.raises(ValueError, match=match):
        Packed(token_documents([5, 5]), seq_len, **arguments)


def test_no_documents_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one document"):
        Packed([], 16)


def test_a_new_epoch_with_shuffle_gives_new_rows_and_still_every_token_once() -> None:
    docs = token_documents(list(range(1, 200)))
    packed = Packed(docs, 64, block=16, shuffle=True, seed=3)
    first = [packed[r]["tokens"].tolist() for r in range(len(packed))]
    packed.set_epoch(1)
    second = [packed[r]["tokens"].tolist() for r in range(len(packed))]
    assert first != second
    assert packed.audit()["tokens"] == sum(range(1, 200))


@pytest.mark.parametrize(("workers", "method"), [(2, "multiprocessing"), (2, "thread")])
def test_rows_through_the_loader_resume_onto_other_workers(workers, method) -> None:
    rng = np.random.default_rng(1)
    docs = token_documents((rng.integers(1, 300, size=400)).tolist())
    packed = Packed(docs, 128, block=32)

    def loader(**options):
        return fl.DataLoader(packed, batch_size=4, shuffle=True, generator=5, **options)

    reference = [b["tokens"].tolist() for b in loader()]
    first = loader(num_workers=workers, worker_method=method)
    iterator = iter(first)
    head = [next(iterator)["tokens"].tolist() for _ in range(7)]
    state = first.state_dict()
    del iterator
    resumed = loader(num_workers=1)
    resumed.load_state_dict(state)
    assert head + [b["tokens"].tolist() for b in resumed] == reference


def test_a_mixture_of_token_sources_packed_in_the_mixture_s_order(tmp_path) -> None:
    from flowloader.text import TokenDataset, write_tokens

    web = TokenDataset(
        write_tokens(token_documents([50] * 40), tmp_path / "web.bin", dtype="uint32")
    )
    code = TokenDataset(
        write_tokens(
            [d + 1_000_000 for d in token_documents([30] * 60)],
            tmp_path / "code.bin",
            dtype="uint32",
        )
    )
    mix = fl.Mixture({"web": web, "code": code}, [0.5, 0.5], stopping="all_exhausted")
    packed = Packed(mix, 64, block=8)
    assert packed.audit()["tokens"] == sum(len(mix[i]) for i in range(len(mix)))
    tokens = np.concatenate(
        [packed[r]["tokens"][packed[r]["segment_ids"] > 0] for r in range(len(packed))]
    )
    assert sorted(tokens.tolist()) == sorted(
        np.concatenate([mix[i] for i in range(len(mix))]).tolist()
    )


def test_collate_adds_varlen_offsets_and_position_ids() -> None:
    packed = Packed(token_documents([3, 5, 2, 7]), 8)
    batch = collate_packed([packed[r] for r in range(len(packed))])
    rows, seq_len = batch["tokens"].shape
    cu = batch["cu_seqlens"]
    assert cu[0] == 0
    assert cu[-1] == rows * seq_len
    assert cu.dtype == np.int32
    lengths = np.diff(cu)
    assert batch["max_seqlen"] == lengths.max()
    flat = batch["segment_ids"].reshape(-1)
    for start, stop in itertools.pairwise(cu):
        assert len(set(flat[start:stop].tolist())) == 1  # each offset range is one segment
        assert start // seq_len == (stop - 1) // seq_len  # and stays within its row
    np.testing.assert_array_equal(batch["position_ids"], batch["positions"])
    mask = block_diagonal_mask(batch["segment_ids"])
    assert mask.shape == (rows, seq_len, seq_len)
    same = batch["segment_ids"][0][:, None] == batch["segment_ids"][0][None, :]
    np.testing.assert_array_equal(mask[0], same & (batch["segment_ids"][0][:, None] > 0))


def test_each_copy_keeps_its_own_plan_cache() -> None:
    """Thread workers read shallow copies of the dataset at once: a shared cache would be
    changed by several threads together."""
    import copy

    packed = Packed(token_documents(list(range(1, 300))), 64, block=16)
    packed[0]
    twin = copy.copy(packed)
    assert twin._plans is not packed._plans
    assert twin[40]["tokens"].tolist() == packed[40]["tokens"].tolist()
    rows = fl.DataLoader(packed, batch_size=4, num_workers=2, worker_method="thread")
    reference = fl.DataLoader(packed, batch_size=4)
    assert [b["tokens"].tolist() for b in rows] == [b["tokens"].tolist() for b in reference]


def test_a_pad_id_the_tokens_cannot_hold_is_refused_at_once() -> None:
    docs = [np.arange(5, dtype=np.uint16), np.arange(3, dtype=np.uint16)]
    with pytest.raises(ValueError, match=r"pad_id=-100 does not fit the documents' uint16"):
        Packed(docs, 8, pad_id=-100)
    assert Packed(docs, 8).__getitems__([]) == []


def test_documents_that_keep_no_epoch_are_measured_once() -> None:
    """A Subset of token arrays forwards set_epoch to nothing: a new epoch re-plans shuffled
    rows without reading every document again to measure it."""
    reads = []

    class Documents(fl.Dataset):
        def __len__(self) -> int:
            return 40

        def __getitem__(self, i: int):
            reads.append(i)
            return np.arange(1 + i % 7)

    packed = Packed(fl.Subset(Documents(), range(40)), 16, block=8, shuffle=True)
    before = len(reads)
    packed.set_epoch(1)
    packed.set_epoch(2)
    assert len(reads) == before  # no document read to re-measure
    assert packed.epoch == 2
    assert packed.audit()["tokens"] == sum(1 + i % 7 for i in range(40))
