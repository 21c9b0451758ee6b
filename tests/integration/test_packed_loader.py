"""Packed rows through the loader: every token of every document exactly once per epoch, from
three token files with and without a Mixture, across a resume onto another worker count and
another world size (DistributedSampler, the global batch kept), and under torchrun."""

from __future__ import annotations

import pytest

import flowloader as fl

from .packed_tokens import every_token, packed_rows, row_tokens, write_sources


def rank_loaders(rows, world: int, batch_size: int, workers: int, state=None) -> list:
    loaders = []
    for rank in range(world):
        sampler = fl.DistributedSampler(
            rows, num_replicas=world, rank=rank, shuffle=True, seed=4, drop_last=True
        )
        loader = fl.DataLoader(rows, batch_size=batch_size, sampler=sampler, num_workers=workers)
        if state is not None:
            loader.load_state_dict(state)
        loaders.append(loader)
    return loaders


def read_tokens(loaders, steps: int | None = None) -> list[int]:
    iterators = [iter(loader) for loader in loaders]
    tokens: list[int] = []
    step = 0
    while steps is None or step < steps:
        try:
            batches = [next(iterator) for iterator in iterators]
        except StopIteration:
            break
        for batch in batches:
            tokens += row_tokens(batch)
        step += 1
    return tokens


def audit_across_a_resume(tmp_path, tokens: int, mixture: bool) -> None:
    """One rank with 2 workers, then 2 ranks of half the batch with 1 worker each: with
    drop_last the epoch reads a whole number of global batches, so the rows not read are
    the last few; every token of the rows read is read once, and the rows account for every
    token of every document (Packed.audit)."""
    sources = write_sources(str(tmp_path), tokens)
    rows = packed_rows(sources, 512, mixture)
    totals = rows.audit()
    first = rank_loaders(rows, 1, 8, workers=2)
    read = read_tokens(first, 10)
    read += read_tokens(rank_loaders(rows, 2, 4, workers=1, state=first[0].state_dict()))
    assert len(read) == len(set(read))  # nothing read twice
    expected = every_token(sources, mixture)
    assert totals["tokens"] == len(expected)
    unread_rows = len(rows) % 8
    assert len(expected) - len(read) <= unread_rows * 512  # only the dropped tail is unread
    assert set(read) <= set(expected)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mixture", [False, True])
def test_every_token_once_across_a_resume_onto_other_workers_and_ranks(tmp_path, mixture):
    audit_across_a_resume(tmp_path, 300_000, mixture)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("mixture", [False, True])
def test_ten_million_tokens_every_one_once(tmp_path, mixture):
    audit_across_a_resume(tmp_path, 10_000_000, mixture)


def test_rows_under_torchrun(tmp_path) -> None:
    pytest.importorskip("torch")
    from flowloader.text import TokenDataset

    from .test_torchrun import torchrun

    ranks = torchrun(2, "torchrun_packed.py", tmp_path, tmp_path / "ranks.json")
    assert ranks[0]["rows"] == ranks[1]["rows"] > 0
    read = [t for r in ranks for t in r["tokens"]]
    assert len(read) == len(set(read))  # the ranks' rows are disjoint
    sources = [TokenDataset(f"{tmp_path}/s{k}.bin") for k in range(3)]
    expected = every_token(sources, mixture=True)
    assert set(read) <= set(expected)
    rows = packed_rows(sources, 256, mixture=True)
    assert len(expected) - len(read) <= (len(rows) % 2) * 256  # drop_last's odd row at most
