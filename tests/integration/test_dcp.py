"""flowloader.integrations.dcp with the real torch.distributed.checkpoint: jobs of 1, 2 and 3
gloo ranks on 127.0.0.1 save and load a loader's position through ``dcp.save`` / ``dcp.load``.

Each job runs this file as a script on every rank (``python test_dcp.py JOB DIR``), each rank
writing what it delivered to ``DIR/JOB-<rank>.json``."""

from __future__ import annotations

import itertools
import json
import os
import sys

import numpy as np
import pytest

import flowloader as fl
from tests.integration.checkpoint_jobs import (
    BATCH,
    N,
    Noisy,
    free_port,
    run_processes,
    take,
    write_output,
)
from tests.integration.packed_tokens import every_token, packed_rows, row_tokens, write_sources

pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def build(seed: int | None = 0, length: int = N, **options: object) -> fl.DataLoader:
    dataset = Noisy() if length == N else fl.Subset(Noisy(), range(length))
    sampler = fl.DistributedSampler(dataset, shuffle=True, seed=3)
    return fl.DataLoader(dataset, batch_size=BATCH, sampler=sampler, generator=seed, **options)


def packed(directory: str) -> fl.DataLoader:
    """Packed token rows over a Mixture of three token files, dealt out by rank."""
    from flowloader.text import TokenDataset

    rows = packed_rows([TokenDataset(f"{directory}/s{k}.bin") for k in range(3)], 64, True)
    sampler = fl.DistributedSampler(rows, seed=5)
    return fl.DataLoader(rows, batch_size=4, sampler=sampler, generator=0)


def job(name: str, directory: str) -> dict[str, object]:
    """One job's work on this rank (torch.distributed is initialised)."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    from flowloader.integrations.dcp import Stateful

    rank, world = dist.get_rank(), dist.get_world_size()
    out: dict[str, object] = {"world": world}
    if name.startswith("chain"):  # chain-<load from>-<save to>-<steps>: one job of a chain
        _, load, save, steps = name.split("-")
        rows = packed(directory)
        if load != "none":
            dcp.load({"loader": Stateful(rows)}, checkpoint_id=f"{directory}/{load}")
        batches = itertools.islice(iter(rows), int(steps))
        out["tokens"] = [row_tokens(batch) for batch in batches]
        if save != "none":
            dcp.save({"loader": Stateful(rows)}, checkpoint_id=f"{directory}/{save}")
    elif name == "save":
        out["whole"] = take(iter(build()), 10)  # the uninterrupted run
        loader = build()
        iterator = iter(loader)
        out["first"] = take(iterator, 5)
        dcp.save({"loader": Stateful(loader)}, checkpoint_id=f"{directory}/seeded")
        rows = packed(directory)
        batches = iter(rows)
        out["packed_first"] = [row_tokens(next(batches)) for _ in range(3)]
        dcp.save({"loader": Stateful(rows)}, checkpoint_id=f"{directory}/packed")
        unseeded = build(seed=None)
        take(iter(unseeded), 2)
        dcp.save({"loader": Stateful(unseeded)}, checkpoint_id=f"{directory}/unseeded")
        out["unseeded_keys"] = sorted(Stateful(unseeded).state_dict())
        if rank == 1:
            next(iterator)  # rank 1 is one batch ahead: the ranks' states differ
        try:
            Stateful(loader).state_dict()
        except ValueError as error:
            out["disagree"] = str(error)
    elif name in ("resume", "rewrite"):
        loader = build(num_workers=2, worker_method="thread")  # fresh: it is the template
        out["template"] = Stateful(loader).state_dict()
        dcp.load({"loader": Stateful(loader)}, checkpoint_id=f"{directory}/seeded")
        out["rest"] = [[b.tolist() for b in batch] for batch in loader]
        if name == "rewrite":  # onto another world size
            rows = packed(directory)
            dcp.load({"loader": Stateful(rows)}, checkpoint_id=f"{directory}/packed")
            out["packed_rest"] = [row_tokens(batch) for batch in rows]
        if name == "resume":
            wrong = build(length=N - 1)
            try:
                dcp.load({"loader": Stateful(wrong)}, checkpoint_id=f"{directory}/seeded")
            except BaseException as error:  # DCP's CheckpointException is a BaseException
                out["refused"] = [type(error).__name__, str(error)]
        unseeded = build(seed=None)
        try:
            dcp.load({"loader": Stateful(unseeded)}, checkpoint_id=f"{directory}/unseeded")
            out["unseeded_rest"] = len(list(unseeded))
        except BaseException as error:
            out["unseeded_refused"] = [type(error).__name__, str(error)]
    return out


def run_job(name: str, world: int, directory: str) -> list[dict]:
    """Start ``world`` ranks of this file on 127.0.0.1; every rank's output, by rank."""
    port = free_port()
    return run_processes(
        __file__,
        name,
        directory,
        world,
        env={
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "WORLD_SIZE": str(world),
            "GLOO_SOCKET_IFNAME": "lo",
        },
        env_of=lambda rank: {"RANK": str(rank)},
        timeout_s=60,
    )


def sources(directory: str) -> list:
    from flowloader.text import TokenDataset

    return [TokenDataset(f"{directory}/s{k}.bin") for k in range(3)]


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> tuple[str, list[dict]]:
    """A checkpoint saved by 2 ranks after 5 steps, and what they delivered."""
    directory = str(tmp_path_factory.mktemp("dcp"))
    write_sources(directory, 20_000)
    return directory, run_job("save", 2, directory)


@pytest.mark.slow  # three gloo jobs (about 17 s): once, in CI's slow stage, beside 1 -> 3
@pytest.mark.timeout(120)
def test_dcp_save_then_load_in_a_new_job_on_two_ranks_then_on_one(saved) -> None:
    directory, first = saved
    resumed = run_job("resume", 2, directory)
    for rank in range(2):
        # 5 steps, a new job, 5 steps: the 10 steps of one uninterrupted run, bit for bit
        assert first[rank]["first"] + resumed[rank]["rest"][:5] == first[rank]["whole"]
        assert len(resumed[rank]["rest"]) == N // 2 // BATCH - 5
        template = resumed[rank]["template"]
        assert sorted(template) == ["state", "version"]  # a fresh loader: the same keys
        assert len(template["state"]) < 2000
    # ranks that disagree are told, on every rank, where
    for rank in range(2):
        assert "batches_yielded (5 vs 6)" in first[rank]["disagree"]
    # a state from another dataset is refused naming it, through DCP
    kind, message = resumed[0]["refused"]
    assert kind == "ValueError"
    assert "dataset_length: saved 128, this loader 127" in message
    # generator=None: each rank's global generator is its own entry, restored on the same ranks
    assert first[0]["unseeded_keys"] == ["rank_0", "state", "version"]
    assert first[1]["unseeded_keys"] == ["rank_1", "state", "version"]
    assert [r["unseeded_rest"] for r in resumed] == [N // 2 // BATCH - 2] * 2
    # another world size: one rank delivers everything not yet delivered, once
    [alone] = run_job("rewrite", 1, directory)
    delivered = [s for r in first for batch in r["first"] for s in batch[0]]
    rest = [s for batch in alone["rest"] for s in batch[0]]
    assert sorted(delivered + rest) == list(range(N))
    # packed rows over a mixture, 2 ranks then 1: every token of the epoch once
    tokens = [
        t
        for r in [*first, alone]
        for key in ("packed_first", "packed_rest")
        for batch in r.get(key, [])
        for t in batch
    ]
    assert sorted(tokens) == every_token(sources(directory), mixture=True)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_dcp_load_on_three_ranks(saved) -> None:
    directory, first = saved
    moved = run_job("rewrite", 3, directory)
    delivered = {s for r in first for batch in r["first"] for s in batch[0]}
    rest = [s for r in moved for batch in r["rest"] for s in batch[0]]
    missing = set(range(N)) - delivered
    assert set(rest) >= missing  # everything not yet delivered ...
    assert len(rest) - len(missing) < 3  # ... once, plus the padding that evens the ranks out
    # packed rows over a mixture, 2 ranks then 3: every token once, plus padding rows
    tokens = [
        t
        for r in [*first, *moved]
        for key in ("packed_first", "packed_rest")
        for batch in r.get(key, [])
        for t in batch
    ]
    expected = every_token(sources(directory), mixture=True)
    assert set(tokens) == set(expected)
    assert len(tokens) - len(expected) <= 2 * 64  # at most two padding rows
    for rank in range(3):  # rank 2 saved no generator of its own: DCP refuses on every rank
        kind, message = moved[rank]["unseeded_refused"]
        assert kind == "CheckpointException"
        assert "loader.rank_2" in message


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_packed_rows_over_a_mixture_through_two_one_three_and_two_ranks(tmp_path) -> None:
    """Data-parallel degree 2 -> 1 -> 3 -> 2 through DCP, each job a new one: every token of
    the epoch is delivered, none twice but for the padding rows that even out a pass."""
    directory = str(tmp_path)
    write_sources(directory, 20_000)
    jobs = [(2, "chain-none-a-3"), (1, "chain-a-b-4"), (3, "chain-b-c-2"), (2, "chain-c-none-999")]
    tokens, passes = [], 0
    for world, name in jobs:
        for rank in run_job(name, world, directory):
            tokens += [t for batch in rank["tokens"] for t in batch]
        passes += world > 1
    expected = every_token(sources(directory), mixture=True)
    assert set(tokens) == set(expected)  # nothing lost
    assert len(tokens) - len(expected) <= passes * 2 * 64  # repeats: at most padding rows


def test_a_fresh_loader_has_the_keys_of_a_saved_one() -> None:
    from flowloader.integrations.dcp import Stateful

    for options in ({"generator": 0}, {"generator": None}, {"shuffle": True}):
        fresh = Stateful(fl.DataLoader(Noisy(), batch_size=BATCH, **options)).state_dict()
        loader = fl.DataLoader(Noisy(), batch_size=BATCH, **options)
        take(iter(loader), 3)
        mid = Stateful(loader).state_dict()
        assert sorted(fresh) == sorted(mid)
        assert all(isinstance(value, str) for key, value in mid.items() if key != "version")


class Stream(fl.IterableDataset):
    """0, 1, ..., 39, with its own position (the loader asks it in-process)."""

    def __init__(self) -> None:
        self.position = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        while self.position < 40:
            self.position += 1
            yield self.position - 1

    def state_dict(self) -> dict[str, int]:
        return {"position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.position = state["position"]


def test_a_stream_is_a_rank_part_with_the_same_keys_fresh_and_saved() -> None:
    from flowloader.integrations.dcp import Stateful

    fresh = Stateful(fl.DataLoader(Stream(), batch_size=4)).state_dict()
    loader = fl.DataLoader(Stream(), batch_size=4)
    take(iter(loader), 3)
    saved = Stateful(loader).state_dict()
    assert sorted(fresh) == sorted(saved) == ["rank_0", "state", "version"]
    assert json.loads(saved["rank_0"])["dataset"] == {"position": 12}
    resumed = fl.DataLoader(Stream(), batch_size=4)
    Stateful(resumed).load_state_dict(saved)
    assert [b.tolist() for b in resumed] == [list(range(k, k + 4)) for k in range(12, 40, 4)]


def test_the_drop_in_loader_saves_the_same_way() -> None:
    from flowloader.integrations.dcp import Stateful
    from flowloader.utils.data import DataLoader

    whole = [[b.tolist() for b in batch] for batch in DataLoader(Noisy(), 4, generator=0)]
    loader = DataLoader(Noisy(), 4, generator=0)
    take(iter(loader), 3)
    resumed = DataLoader(Noisy(), 4, generator=0)
    Stateful(resumed).load_state_dict(Stateful(loader).state_dict())
    assert [[b.tolist() for b in batch] for batch in resumed] == whole[3:]


@pytest.mark.timeout(120)
@pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")
def test_a_hundred_random_stops_through_dcp_continue_exactly(tmp_path) -> None:
    """Packed rows over a shuffled Mixture, stopped after a random number of batches in a
    random epoch, saved with dcp.save and loaded by dcp.load into a fresh loader (one
    process): what follows is the uninterrupted run's, bit for bit."""
    import torch.distributed.checkpoint as dcp

    from flowloader.integrations.dcp import Stateful

    write_sources(str(tmp_path), 6_000)

    def rows() -> fl.DataLoader:
        sampler = fl.DistributedSampler(packed_rows(sources(str(tmp_path)), 64, True), 1, 0)
        return fl.DataLoader(sampler.dataset, batch_size=3, sampler=sampler, generator=0)

    loader = rows()
    epochs = [[row_tokens(batch) for batch in loader] for _ in range(2)]
    whole = [batch for epoch in epochs for batch in epoch]
    per_epoch = len(epochs[0])
    rng = np.random.default_rng(0)
    for point, stop in enumerate(rng.integers(0, 2 * per_epoch, size=100)):
        loader = rows()
        epoch, steps = divmod(int(stop), per_epoch)
        for _ in range(epoch):
            list(loader)
        iterator = iter(loader)
        for _ in range(steps):
            next(iterator)
        dcp.save({"loader": Stateful(loader)}, checkpoint_id=tmp_path / f"c{point}")
        resumed = rows()
        dcp.load({"loader": Stateful(resumed)}, checkpoint_id=tmp_path / f"c{point}")
        rest = [row_tokens(batch) for batch in resumed]
        if epoch == 0:
            rest += [row_tokens(batch) for batch in resumed]
        assert rest == whole[epoch * per_epoch + steps :], (epoch, steps)


def test_the_fixed_form_loads_through_the_loader_and_old_states_too() -> None:
    from flowloader.integrations.dcp import Stateful

    whole = [[b.tolist() for b in batch] for batch in fl.DataLoader(Noisy(), 4, generator=0)]
    loader = fl.DataLoader(Noisy(), 4, generator=0)
    take(iter(loader), 3)
    plain, fixed = loader.state_dict(), Stateful(loader).state_dict()
    for state in (plain, fixed):
        resumed = fl.DataLoader(Noisy(), 4, generator=0, num_workers=1)
        Stateful(resumed).load_state_dict(state)
        assert [[b.tolist() for b in batch] for batch in resumed] == whole[3:]
    with pytest.raises(ValueError, match="version 2"):
        loader.load_state_dict({**fixed, "version": 2})
    with pytest.raises(ValueError, match='"state" is not JSON'):
        loader.load_state_dict({**fixed, "state": "{"})
    unseeded = fl.DataLoader(Noisy(), 4)
    own = Stateful(unseeded).state_dict()
    own["rank_1"] = own.pop("rank_0")  # another rank's part only
    with pytest.raises(ValueError, match=r"no part for rank 0 \(it holds \['rank_1'\]\)"):
        unseeded.load_state_dict(own)


if __name__ == "__main__":
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method="env://")
    name, directory = sys.argv[1], sys.argv[2]
    write_output(directory, name, dist.get_rank(), job(name, directory))
    dist.destroy_process_group()
    # torch 2.13's teardown now and then aborts after Python has finished ("terminate called
    # without an active exception", no Python frame left): the job is done, skip it
    sys.stdout.flush()
    os._exit(0)
