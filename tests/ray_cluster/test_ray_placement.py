"""Where Ray cannot place the loader's actors: an error at once when no node can ever hold
them and nothing can add one, and actors lost with a node before they started placed again
without counting as worker restarts."""

from __future__ import annotations

import time
import warnings

import pytest

from flowloader.errors import LoaderTimeoutError

from ..readme_blocks import python_blocks, run_block
from .conftest import LOADER_RESOURCE, ON_WORKER_NODES
from .datasets import Noisy
from .test_ray_transport import assert_same, batches, loader, reference, run_driver

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]


def refused(dataset, **options) -> tuple[str, float]:
    """The error starting an epoch gives, and how long it took."""
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="can never hold") as caught:
        iter(loader(dataset, **options))
    return str(caught.value), time.monotonic() - start


def test_a_resource_no_node_has_is_an_error_at_once(cluster) -> None:
    options = {"num_cpus": 0, "resources": {"tpu_host": 1}}
    message, took = refused(Noisy(n=16), ray_options=options)
    assert took < 10
    assert "the Ray cluster can never hold the loader's 2 actors" in message
    assert "no autoscaler" in message
    assert "each actor asks for tpu_host 1" in message
    assert "127.0.0.1" in message
    assert "tpu_host 0" in message


def test_more_actors_than_the_nodes_hold_is_an_error_at_once(cluster) -> None:
    message, took = refused(Noisy(n=16), num_workers=5, ray_options=ON_WORKER_NODES)
    assert took < 10
    assert f"each actor asks for {LOADER_RESOURCE} 1" in message
    assert "hold 4 such actors in all" in message
    assert len(list(loader(Noisy(n=16), num_workers=4))) == 2  # what they hold still runs


def test_on_the_local_instance_it_started_the_loader_refuses_at_once(tmp_path) -> None:
    done = run_driver(
        tmp_path,
        """
        import time
        import flowloader as fl
        from tests.ray_cluster import datasets
        data = fl.DataLoader(datasets.Noisy(n=16), batch_size=4, num_workers=2,
                             worker_method="ray",
                             ray_options={"num_cpus": 1, "resources": {"preprocess": 1}})
        start = time.monotonic()
        try:
            iter(data)
        except RuntimeError as error:
            print(f"{time.monotonic() - start:.1f}", error)
        """,
    )
    assert done.returncode == 0, done.stderr
    took, message = done.stdout.strip().splitlines()[-1].split(" ", 1)
    assert float(took) < 10
    assert "the local Ray instance the loader started can never hold" in message
    assert "preprocess 1" in message


def test_20_new_epochs_right_after_a_node_loss_complete_without_restarts(cluster) -> None:
    """Each trial removes a worker node and at once starts a new epoch on the cluster, whose
    actors Ray may still place on the lost node: those are placed again, not restarted."""
    dataset = Noisy(n=48)
    expected = reference(dataset, batch_size=8, shuffle=True, generator=4)
    placed_again = 0
    for _ in range(20):
        data = loader(dataset, shuffle=True, generator=4)  # max_worker_restarts=0
        cluster.remove_node(cluster.worker_nodes[0].node_id)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            iterator = iter(data)
            assert_same(batches(iterator), expected)
        assert iterator.stats().worker_restarts == 0
        placed_again += sum("placed it again" in str(w.message) for w in caught)
        cluster.add_worker_node()
    print(f"actors placed again after a node loss: {placed_again} in 20 epochs")


def test_a_timeout_says_which_actors_never_started(cluster, monkeypatch) -> None:
    """On a cluster that may grow (here: made to look so), the loader waits; timeout= is the
    deadline, and its error names the actors that were never placed."""
    from flowloader._iter import ray_placement

    monkeypatch.setattr(ray_placement, "_cluster_may_grow", lambda: True)
    data = loader(Noisy(n=16), timeout=3, ray_options={"num_cpus": 0, "resources": {"gpu_x": 1}})
    with pytest.raises(LoaderTimeoutError, match=r"Ray actors \[0, 1\] had not started"):
        next(iter(data))


def test_the_readme_ray_recipe_runs_as_pasted(cluster, tmp_path) -> None:
    """The README's block, in a new driver that joins this cluster (RAY_ADDRESS, as `ray
    start` leaves it for `address="auto"`), whose worker nodes have "preprocess" slots."""
    (block,) = [b for b in python_blocks() if 'worker_method="ray"' in b.code]
    run_block(block, tmp_path, {"RAY_ADDRESS": cluster.address}, timeout=180)
