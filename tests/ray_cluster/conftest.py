"""A real Ray cluster on this machine for the Ray transport's tests: a head and two worker
nodes (one CPU each, a small object store), the worker nodes carrying a custom resource that
``ray_options`` uses to place the loader's actors on them.

Loopback only. On these machines Ray otherwise advertises the machine's outward address, so
the tests run only inside a network namespace of their own whose one interface is loopback
(CI: RUN_IN_NAMESPACE below), every node and the driver are given 127.0.0.1, and every
node's address is checked before a test runs. Elsewhere these tests are skipped, with that
command as the reason.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

# Read when Ray is imported (its native part included): no usage statistics, and Ray's own
# address lookup returns loopback instead of probing for an outward address.
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
# Ray's token authentication keeps one token per machine (~/.ray/auth_token), which every
# new instance rewrites: the tests' second drivers and instances would be refused. Loopback
# inside a namespace of its own needs no token.
os.environ["RAY_AUTH_MODE"] = "disabled"

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'flowloader[ray]')")

from . import datasets  # noqa: E402

# The actors rebuild the tests' datasets from their pickles, without importing the tests.
ray.cloudpickle.register_pickle_by_value(datasets)

LOOPBACK = "127.0.0.1"
# The loader's actors go to the worker nodes: each has room for two of them (and for one
# actor of the README's Ray recipe, which asks for a CPU and its "preprocess" resource).
LOADER_RESOURCE = "loader_node"
ON_WORKER_NODES = {"num_cpus": 0, "resources": {LOADER_RESOURCE: 1}}
NODE_ARGS: dict[str, Any] = {
    "num_cpus": 1,
    "node_ip_address": LOOPBACK,
    "object_store_memory": 96 << 20,
    "resources": {LOADER_RESOURCE: 2, "preprocess": 2},
}
# A node removed without grace is declared dead within about a second; objects nobody holds
# are freed within 0.1 s (Ray batches frees, once a second by default).
HEAD_ARGS: dict[str, Any] = {
    "num_cpus": 1,
    "node_ip_address": LOOPBACK,
    "object_store_memory": 96 << 20,
    "include_dashboard": False,
    "_system_config": {
        "health_check_initial_delay_ms": 0,
        "health_check_period_ms": 200,
        "health_check_timeout_ms": 500,
        "health_check_failure_threshold": 3,
        "free_objects_period_milliseconds": 100,
    },
}
RUN_IN_NAMESPACE = (
    "unshare -n sh -c 'ip link set lo up && python -m pytest -m ray tests/ray_cluster' (as root)"
)


def only_loopback() -> bool:
    """True inside a network namespace whose only interface is loopback."""
    return [name for _, name in socket.if_nameindex()] == ["lo"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if only_loopback():
        return
    skip = pytest.mark.skip(reason=f"Ray cluster tests run on loopback only: {RUN_IN_NAMESPACE}")
    for item in items:
        if "tests/ray_cluster/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(skip)


def assert_loopback_cluster() -> None:
    addresses = {node["NodeManagerAddress"] for node in ray.nodes() if node["Alive"]}
    assert addresses == {LOOPBACK}, f"a Ray node is not on loopback: {addresses}"
    assert ray.util.get_node_ip_address() == LOOPBACK


class LocalCluster:
    """The cluster, with the node operations the fault tests need."""

    def __init__(self) -> None:
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(initialize_head=True, connect=False, head_node_args=HEAD_ARGS)
        self.worker_nodes = [self.cluster.add_node(**NODE_ARGS) for _ in range(2)]
        ray.init(address=self.cluster.address, _node_ip_address=LOOPBACK, log_to_driver=False)
        assert_loopback_cluster()

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def node_of(self, node_id: str) -> Any:
        return next(n for n in self.worker_nodes if n.node_id == node_id)

    def kill_node(self, node_id: str) -> None:
        """Remove a worker node at once (its raylet and actors killed), then add a new one,
        as an autoscaler would."""
        self.remove_node(node_id)
        self.add_worker_node()

    def remove_node(self, node_id: str) -> None:
        """Remove a worker node at once (its raylet and actors killed), nothing added."""
        node = self.node_of(node_id)
        self.worker_nodes.remove(node)
        self.cluster.remove_node(node, allow_graceful=False)

    def add_worker_node(self) -> None:
        self.worker_nodes.append(self.cluster.add_node(**NODE_ARGS))
        assert_loopback_cluster()

    def shutdown(self) -> None:
        ray.shutdown()
        self.cluster.shutdown()


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    assert only_loopback(), RUN_IN_NAMESPACE
    local = LocalCluster()
    try:
        yield local
    finally:
        local.shutdown()


def live_loader_actors() -> list[str]:
    """The loader's actors that Ray does not list as dead."""
    return list(_live_loader_actors())


def _live_loader_actors() -> dict[str, dict[str, Any]]:
    return {
        actor_id: actor
        for actor_id, actor in ray._private.state.actors().items()
        if actor["State"] != "DEAD" and "RayWorker" in str(actor.get("ActorClassName", ""))
    }


def _described(actors: dict[str, dict[str, Any]]) -> str:
    """Each actor's state and node, for an assertion's message."""
    alive = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
    lines = []
    for actor_id, actor in actors.items():
        node = actor.get("Address", {}).get("NodeID", "") or ""
        where = f"node {node[:12]} ({'alive' if node in alive else 'dead'})" if node else "no node"
        lines.append(f"{actor_id}: {actor['State']} on {where}, pid {actor.get('Pid')}")
    return "; ".join(lines)


@pytest.fixture(autouse=True)
def no_actor_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every test leaves no loader actor alive (once its loaders are dropped). Actors left
    are killed here, after the test fails, so that they fail no later test."""
    yield
    if "cluster" not in request.fixturenames:
        return
    import gc
    import time

    gc.collect()
    deadline = time.monotonic() + 30  # a loaded machine: Ray reports kills in seconds
    while live_loader_actors() and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _live_loader_actors()
    for actor_id in left:
        _kill(actor_id)
    assert not left, f"loader actors left alive: {_described(left)}"
    assert_loopback_cluster()


def _kill(actor_id: str) -> None:
    """Kill an actor known only by its id (the loader that held its handle is gone)."""
    from ray._raylet import ActorID

    try:
        ray._private.worker.global_worker.core_worker.kill_actor(ActorID.from_hex(actor_id), True)
    except Exception as error:  # an actor this driver does not know: say so, go on
        print(f"could not kill actor {actor_id}: {error}")
