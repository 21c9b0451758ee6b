"""Can the Ray cluster ever hold the loader's actors? Asked once, before they are created.

Ray queues an actor that no node can hold and waits for a node that can, forever unless an
autoscaler adds one: the loader would wait for batches that never come. So before starting
its actors the loader compares what each actor asks (``ray_options``: CPUs, GPUs, memory,
custom resources) with every live node's total resources. If the nodes cannot hold all
``num_workers`` actors even when idle, and the cluster cannot grow (the local instance the
loader started, or a cluster whose autoscaler is Ray's read-only one: nodes started by hand
with ``ray start``), it is an error at once naming the resource and what each node has. A
cluster with an autoscaler may add the node: the loader waits, warns, and ``timeout=``
bounds the wait.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

import ray

# Ray's monitor process (on every head node) writes the autoscaler's report under this key
# every few seconds; its first report comes a few seconds after the head starts.
_AUTOSCALING_STATUS_KEY = "__autoscaling_status"
REPORT_WAIT_S = 8.0
_EPSILON = 1e-9


def actor_demand(options: dict[str, Any]) -> dict[str, float]:
    """The resources one actor asks for, under Ray's resource names."""
    demand = {
        "CPU": float(options.get("num_cpus") or 0),
        "GPU": float(options.get("num_gpus") or 0),
        "memory": float(options.get("memory") or 0),
    }
    for name, amount in (options.get("resources") or {}).items():
        demand[str(name)] = float(amount)
    return {name: amount for name, amount in demand.items() if amount > 0}


def actors_held(demand: dict[str, float], totals: dict[str, float]) -> float:
    """How many such actors a node with ``totals`` holds when nothing else runs there."""
    if not demand:
        return math.inf
    return min(math.floor(totals.get(name, 0.0) / need + _EPSILON) for name, need in demand.items())


def check_placeable(options: dict[str, Any], num_workers: int, started_here: bool) -> None:
    """Raise RuntimeError if the cluster can never hold ``num_workers`` actors with
    ``options`` and cannot grow; return otherwise (also when it cannot tell)."""
    nodes = _eligible_nodes(options.get("scheduling_strategy"))
    if nodes is None:
        return  # a placement group: Ray checks its bundles itself
    demand = actor_demand(options)
    held = sum(actors_held(demand, node["Resources"]) for node in nodes)
    if held >= num_workers:
        return
    if not started_here and _cluster_may_grow():
        return
    where = "the local Ray instance the loader started" if started_here else "the Ray cluster"
    why = "it cannot add nodes" if started_here else "it has no autoscaler to add nodes"
    have = "; ".join(_node_summary(node, demand) for node in nodes) or "no live node"
    raise RuntimeError(
        f"worker_method='ray': {where} can never hold the loader's {num_workers} actors, and "
        f"{why}: each actor asks for {_amounts(demand)} (ray_options {options}), and its "
        f"nodes hold {int(held)} such actors in all ({have}). Lower num_workers, change "
        "ray_options, or join a cluster whose nodes have these resources (ray start "
        "--resources=..., then ray.init(address=...) before iterating)."
    )


def _eligible_nodes(strategy: Any) -> list[dict[str, Any]] | None:
    """The live nodes an actor may go to; None where a placement group decides."""
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    if strategy is None or isinstance(strategy, str):
        return nodes  # "DEFAULT", "SPREAD"
    node_id = getattr(strategy, "node_id", None)
    if node_id is None:
        return None
    if getattr(strategy, "soft", False):
        return nodes
    return [node for node in nodes if node.get("NodeID") == node_id]


def _cluster_may_grow() -> bool:
    """True if an autoscaler may add nodes: autoscaler v2 (KubeRay), or a v1 report whose
    node types are a configuration's rather than the read-only provider's ``node_<id>``.
    A head's monitor reports within seconds of its start; it is waited for that long."""
    try:
        from ray.autoscaler.v2.utils import is_autoscaler_v2

        if is_autoscaler_v2(fetch_from_server=True):
            return True
    except Exception:  # an older or newer layout: the v1 report below still tells
        pass
    from ray.experimental.internal_kv import _internal_kv_get

    deadline = time.monotonic() + REPORT_WAIT_S
    while True:
        status = _internal_kv_get(_AUTOSCALING_STATUS_KEY)
        if status is None:
            return False  # no monitor at all: nothing can add a node
        report = json.loads(status).get("autoscaler_report")
        if report is not None:
            mapping = report.get("node_type_mapping") or {}
            return not all(kind == f"node_{node}" for node, kind in mapping.items())
        if time.monotonic() >= deadline:
            return True  # cannot tell: wait and warn, as for an autoscaling cluster
        time.sleep(0.25)


def _node_summary(node: dict[str, Any], demand: dict[str, float]) -> str:
    totals = node["Resources"]
    have = {name: totals.get(name, 0.0) for name in demand}
    return f"{node.get('NodeManagerAddress', '?')} ({str(node.get('NodeID', ''))[:12]}): " + (
        _amounts(have) if have else "anything"
    )


def _amounts(amounts: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:g}" for name, value in amounts.items()) or "nothing"
