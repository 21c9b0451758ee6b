"""flowloader.integrations.orbax with the real Orbax (and Grain's handler): JAX CPU jobs of 1
and 2 processes on 127.0.0.1 (``jax.distributed``) save a loader's position with a
``CheckpointManager`` and restore it.

Each job runs this file as a script in every process (``python test_orbax.py JOB DIR``), each
writing what it delivered to ``DIR/JOB-<index>.json``."""

from __future__ import annotations

import json
import sys

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

pytest.importorskip("jax")
pytest.importorskip("grain")  # pip install -e ".[checkpoint-test]"
pytest.importorskip("orbax.checkpoint")


def build() -> fl.DataLoader:
    dataset = Noisy()
    sampler = fl.DistributedSampler(dataset, seed=3)  # rank and world from jax.distributed
    return fl.DataLoader(dataset, batch_size=BATCH, sampler=sampler, generator=0)


def global_batch(local: object) -> dict[str, list]:
    """The processes' batches as one global array (the page's recipe): its shape, and this
    process's part of it."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    sharding = NamedSharding(Mesh(jax.devices(), ("data",)), PartitionSpec("data"))
    batch = jax.make_array_from_process_local_data(sharding, local)
    mine = [shard.data.tolist() for shard in batch.addressable_shards]
    return {"shape": list(batch.shape), "mine": mine}


def job(name: str, directory: str) -> dict[str, object]:
    """One job's work in this process (jax.distributed is initialised)."""
    import grain
    import orbax.checkpoint as ocp

    from flowloader.integrations import orbax as flo

    out: dict[str, object] = {}
    manager = ocp.CheckpointManager(f"{directory}/checkpoints")
    if name == "save":
        out["whole"] = take(iter(build()), 10)  # the uninterrupted run
        out["global"] = global_batch(next(iter(build()))[0])
        loader = build()
        out["first"] = take(iter(loader), 5)
        both = ocp.args.Composite(
            loader=flo.CheckpointSave(loader),
            grain=grain.checkpoint.CheckpointSave(flo.Checkpointable(loader)),
        )
        manager.save(5, args=both)
        manager.wait_until_finished()
    else:
        ours = build()
        manager.restore(5, args=ocp.args.Composite(loader=flo.CheckpointRestore(ours)))
        out["rest"] = [[b.tolist() for b in batch] for batch in ours]
        if name == "resume":  # Grain's handler: onto as many processes only
            theirs = flo.Checkpointable(build())
            restored = ocp.args.Composite(grain=grain.checkpoint.CheckpointRestore(theirs))
            manager.restore(5, args=restored)
            out["grain_rest"] = [[b.tolist() for b in batch] for batch in theirs]
    manager.close()
    return out


def run_job(name: str, processes: int, directory: str) -> list[dict]:
    """Start ``processes`` JAX processes of this file on 127.0.0.1; their outputs, by index."""
    port = free_port()
    return run_processes(
        __file__,
        name,
        directory,
        processes,
        env={"JAX_PLATFORMS": "cpu"},
        argv_of=lambda index: [str(port), str(index), str(processes)],
        timeout_s=90,
    )


@pytest.mark.slow  # three JAX jobs (about 12 s): once, in CI's slow stage
@pytest.mark.timeout(180)
def test_orbax_composite_save_on_two_processes_restores_on_two_and_one(tmp_path) -> None:
    directory = str(tmp_path)
    saved = run_job("save", 2, directory)
    resumed = run_job("resume", 2, directory)
    for index in range(2):
        # 5 steps, a new job, 5 steps: the 10 steps of one uninterrupted run, bit for bit,
        # through our handler and through Grain's
        assert saved[index]["first"] + resumed[index]["rest"][:5] == saved[index]["whole"]
        assert resumed[index]["grain_rest"] == resumed[index]["rest"]
        # output batches assembled into a global array: each process's batch is its part
        assert saved[index]["global"] == {
            "shape": [2 * BATCH],
            "mine": [saved[index]["whole"][0][0]],
        }
    [alone] = run_job("rewrite", 1, directory)  # one process delivers the rest, once
    delivered = [s for r in saved for batch in r["first"] for s in batch[0]]
    rest = [s for batch in alone["rest"] for s in batch[0]]
    assert sorted(delivered + rest) == list(range(N))


def seeded() -> fl.DataLoader:
    return fl.DataLoader(Noisy(), batch_size=BATCH, shuffle=True, generator=0)


def test_grain_methods_are_utf8_json_and_orbax_v1_methods_round_trip(tmp_path) -> None:
    from orbax.checkpoint import v1 as ocp_v1

    from flowloader.integrations.orbax import Checkpointable

    whole = [[b.tolist() for b in batch] for batch in seeded()]
    loader = seeded()
    iterator = iter(loader)
    take(iterator, 3)
    state = Checkpointable(loader).get_state()
    assert json.loads(state.decode("utf-8")) == loader.state_dict()
    other = Checkpointable(seeded())
    other.set_state(state)
    other.start_prefetch()
    assert [[b.tolist() for b in batch] for batch in other] == whole[3:]
    ocp_v1.save_checkpointables(tmp_path / "v1", {"loader": Checkpointable(loader)})
    again = Checkpointable(seeded())
    ocp_v1.load_checkpointables(tmp_path / "v1", {"loader": again})
    assert [[b.tolist() for b in batch] for batch in again] == whole[3:]


def test_processes_whose_states_differ_are_refused_naming_the_field(tmp_path) -> None:
    from flowloader.integrations.orbax import CheckpointHandler, CheckpointRestore

    states = []
    for steps in (3, 4):
        loader = seeded()
        take(iter(loader), steps)
        states.append(json.dumps(loader.state_dict()))
    fixed = [{"version": 3, "state": json.dumps(json.loads(s), sort_keys=True)} for s in states]
    for index, value in enumerate(fixed):
        (tmp_path / f"flowloader_process_{index}-of-2.json").write_text(json.dumps(value))
    with pytest.raises(ValueError, match=r"process 1 at batches_yielded \(3 vs 4\)"):
        CheckpointHandler().restore(tmp_path, args=CheckpointRestore(seeded()))
    with pytest.raises(ValueError, match="holds no flowloader state"):
        CheckpointHandler().restore(tmp_path / "..", args=CheckpointRestore(seeded()))


if __name__ == "__main__":
    import jax

    name, directory, port, index, count = sys.argv[1:6]
    jax.distributed.initialize(f"127.0.0.1:{port}", int(count), int(index))
    write_output(directory, name, jax.process_index(), job(name, directory))
    jax.distributed.shutdown()
