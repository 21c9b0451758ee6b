"""flowloader.integrations.torchtitan against the released torchtitan package: the loader built
as torchtitan's trainer builds it, iterated through the trainer's own batch generator,
checkpointed with torch.distributed.checkpoint and resumed on the same and on other
data-parallel degrees, every packed row once.

torchtitan pins datasets < 4.8, below what the tables' tests need, so CI runs these in an
environment of its own (the ``titan-test`` extra, beside torch 2.13); elsewhere, where it does
not import, the tests that need it skip. Data-parallel ranks are simulated in one process (a
loader per rank, with explicit ``dp_rank`` / ``dp_world_size``, as the trainer passes them):
the state is the same on every rank, and DCP keeps one copy of it, so one rank's save stands
for the job's."""

from __future__ import annotations

import dataclasses
import sys
import types

import numpy as np
import pytest

from flowloader.integrations import torchtitan as titan
from tests.integration.packed_tokens import write_sources

pytestmark = pytest.mark.timeout(300)

SEQ_LEN, BATCH = 64, 4
PAD = 2**32 - 1  # no document's token (token = document * 1024 + position)


def titan_module() -> types.ModuleType:
    return pytest.importorskip("torchtitan.components.dataloader")


def config(directory: str, **options: object):
    sources = {f"s{k}": f"{directory}/s{k}.bin" for k in range(3)}
    return titan.PackedDataLoader.Config(
        sources=sources, weights=[0.5, 0.3, 0.2], pad_id=PAD, **options
    )


def build(cfg, world: int, rank: int):
    """As torchtitan's trainer builds its data loader."""
    return cfg.build(
        dp_world_size=world,
        dp_rank=rank,
        tokenizer=None,
        seq_len=SEQ_LEN,
        local_batch_size=BATCH,
        snapshot_every_n_steps=10,
    )


def tokens(batch) -> list[int]:
    inputs, _ = batch
    found = inputs["input"].numpy()
    return found[found != PAD].tolist()


def epoch_tokens(directory: str) -> list[int]:
    """Every real token of one epoch of the rows, each once (one rank alone reads them all)."""
    loader = build(config(directory, infinite=False), 1, 0)
    return sorted(t for batch in loader for t in tokens(batch))


@pytest.fixture
def sources(tmp_path) -> str:
    write_sources(str(tmp_path), 30000)
    return str(tmp_path)


def test_labeled_rows_labels_the_next_token_of_the_same_document() -> None:
    row = {
        "tokens": np.array([5, 6, 7, 8, 9, 0], np.uint32),
        "segment_ids": np.array([1, 1, 1, 2, 2, 0]),
        "positions": np.array([0, 1, 2, 0, 1, 0]),
    }
    inputs, labels = titan.labeled_rows([row, row])
    assert inputs["input"].dtype == labels.dtype == np.int64
    assert inputs["input"][1].tolist() == [5, 6, 7, 8, 9, 0]
    assert inputs["positions"][0].tolist() == [0, 1, 2, 0, 1, 0]
    assert labels[0].tolist() == [6, 7, -100, 9, -100, -100]


def test_without_torchtitan_the_class_names_the_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "torchtitan", None)  # as if not installed
    monkeypatch.setattr(titan, "_built", {})
    with pytest.raises(ImportError, match="pip install torchtitan"):
        titan.PackedDataLoader  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'Missing'"):
        titan.Missing  # noqa: B018


def test_the_trainer_builds_it_and_its_generator_ends_with_exhaustion(sources) -> None:
    module = titan_module()
    from torch.distributed.checkpoint.stateful import Stateful

    # the trainer's module imports triton, which CPU builds of torch go without
    Trainer = pytest.importorskip("torchtitan.trainer").Trainer

    cfg = config(sources, infinite=False)
    assert isinstance(cfg, module.BaseDataLoader.Config)
    loader = build(cfg, 2, 1)
    assert isinstance(loader, module.BaseDataLoader)
    assert isinstance(loader, Stateful)
    inputs, labels = next(iter(loader))
    assert sorted(inputs) == ["input", "positions"]
    assert inputs["input"].shape == labels.shape == (BATCH, SEQ_LEN)
    same = labels[:, :-1] != -100
    assert (labels[:, :-1][same] == inputs["input"][:, 1:][same]).all()
    # The trainer's own batch generator: it turns the loader's end into its exhaustion error.
    fake = types.SimpleNamespace(
        metrics_processor=types.SimpleNamespace(ntokens_since_last_log=0, data_loading_times=[])
    )
    generator = Trainer.batch_generator(fake, build(cfg, 2, 1))
    steps = len(build(cfg, 2, 1).loader)
    for _ in range(steps):
        next(generator)
    with pytest.raises(module.DataloaderExhaustedError):
        next(generator)
    # infinite (the default, and the validator's replace() of it): the next epoch follows
    endless = iter(build(dataclasses.replace(cfg, infinite=True), 2, 1))
    assert len([next(endless) for _ in range(steps + 3)]) == steps + 3


def test_a_config_without_sources_is_refused() -> None:
    titan_module()
    with pytest.raises(ValueError, match="sources is empty"):
        build(titan.PackedDataLoader.Config(), 1, 0)


def save(loaders: list, directory: str) -> None:
    """One job's DCP save: every rank's state is the same, and DCP keeps one copy."""
    import torch.distributed.checkpoint as dcp

    states = [loader.state_dict() for loader in loaders]
    assert all(state == states[0] for state in states)
    assert sorted(states[0]) == ["state", "version"]
    dcp.save({"dataloader": loaders[0]}, checkpoint_id=directory)


def load(cfg, world: int, directory: str) -> list:
    """A new job's loaders, fresh (DCP's template) and loaded on every rank."""
    import torch.distributed.checkpoint as dcp

    loaders = [build(cfg, world, rank) for rank in range(world)]
    for loader in loaders:
        dcp.load({"dataloader": loader}, checkpoint_id=directory)
    return loaders


def steps(loaders: list, count: int | None) -> list[list[list[int]]]:
    """``count`` batches (all, if None) from each rank's loader, by rank."""
    taken = []
    for loader in loaders:
        iterator = iter(loader)
        batches = iterator if count is None else (next(iterator) for _ in range(count))
        taken.append([tokens(batch) for batch in batches])
    return taken


def test_dcp_resume_on_the_same_degree_is_bit_equal(sources, tmp_path) -> None:
    titan_module()
    cfg = config(sources)
    whole = steps([build(cfg, 2, rank) for rank in range(2)], 10)
    first_job = [build(cfg, 2, rank) for rank in range(2)]
    first = steps(first_job, 5)
    save(first_job, str(tmp_path / "step-5"))
    second_job = load(cfg, 2, str(tmp_path / "step-5"))
    # loaded, not yet iterated: its state is the one saved
    assert second_job[0].state_dict() == first_job[0].state_dict()
    rest = steps(second_job, 5)
    assert [a + b for a, b in zip(first, rest, strict=True)] == whole


def test_dcp_resume_across_degrees_2_1_3_2_delivers_every_row_once(sources, tmp_path) -> None:
    titan_module()
    cfg = config(sources, infinite=False)
    delivered: list[int] = []
    jobs = [(2, 3), (1, 4), (3, 2), (2, None)]  # (data-parallel degree, steps; None: to the end)
    previous = None
    for number, (world, count) in enumerate(jobs):
        if previous is None:
            loaders = [build(cfg, world, rank) for rank in range(world)]
        else:
            loaders = load(cfg, world, previous)
        for per_rank in steps(loaders, count):
            delivered += [t for batch in per_rank for t in batch]
        if count is not None:
            previous = str(tmp_path / f"job-{number}")
            save(loaders, previous)
    # Every real token once: no row lost or repeated (the rows left for the last job split
    # evenly over its 2 ranks, so its DistributedSampler added no padding row).
    assert sorted(delivered) == epoch_tokens(sources)


class Empty:
    """A Stateful with nothing to save (the optimizers and schedulers of this test)."""

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


def test_torchtitans_checkpoint_manager_resumes_it_on_3_ranks(sources, tmp_path) -> None:
    """torchtitan's own CheckpointManager (on a 1-rank gloo group) saves the loader of a job
    of 2 ranks after 5 steps, and restores it into each rank of a job of 3."""
    titan_module()
    import torch
    import torch.distributed as dist
    from torchtitan.components.checkpoint import CheckpointManager

    def manager(loader):
        settings = CheckpointManager.Config(
            enable=True, folder="checkpoint", interval=5, last_save_model_only=False
        )
        return settings.build(
            dataloader=loader,
            model_parts=[torch.nn.Linear(2, 2)],
            optimizers=Empty(),
            lr_schedulers=Empty(),
            states={"train_state": Empty()},
            sd_adapter=None,
            base_folder=str(tmp_path),
        )

    cfg = config(sources, infinite=False)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/group", rank=0, world_size=1)
    try:
        first_job = [build(cfg, 2, rank) for rank in range(2)]
        delivered = [t for per_rank in steps(first_job, 5) for b in per_rank for t in b]
        assert manager(first_job[0]).save(curr_step=5)
        second_job = [build(cfg, 3, rank) for rank in range(3)]
        for loader in second_job:
            assert manager(loader).load(step=5)
        delivered += [t for per_rank in steps(second_job, None) for b in per_rank for t in b]
    finally:
        dist.destroy_process_group()
    assert sorted(delivered) == epoch_tokens(sources)  # every token once, on 3 ranks
