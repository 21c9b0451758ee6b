"""The Ray transport's long proofs (``-m "ray and slow"``; CI runs them once in its Ray
step): 100 random resume points across transports and worker counts, 20 actors and 20 nodes
killed mid-epoch with ``max_worker_restarts``, each giving exactly the failure-free batches."""

from __future__ import annotations

import os
import random
import signal
import warnings

import pytest

import flowloader as fl

from .conftest import ON_WORKER_NODES
from .datasets import Noisy
from .test_ray_transport import actor_info, assert_same, batches

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(900)]

DATASET = Noisy(n=64)
# 20 batches: at the kill (after at most 5) both actors still have batches to load; batches
# of 384 KiB wait in the object store of the node that made them.
SLOW_DATASET = Noisy(n=160, delay_s=0.005, side=64)
BATCH = 8
# (worker_method, num_workers) pairs a resume may start or end in.
TRANSPORTS = [("ray", 1), ("ray", 2), ("ray", 3), ("multiprocessing", 2), ("thread", 2), ("", 0)]


def make_loader(method: str, workers: int, seed: int, dataset=DATASET, **options):
    if method == "ray":
        options.update(worker_method="ray", ray_options=ON_WORKER_NODES)
    elif method:
        options.update(worker_method=method)
    return fl.DataLoader(
        dataset, batch_size=BATCH, shuffle=True, generator=seed, num_workers=workers, **options
    )


def busy_actor(iterator, worker_id: int) -> tuple[int, str, str, str]:
    """(pid, node id, ...) of a worker's actor as the loader knows it (asked of the actor,
    behind its queue of tasks, only before the loader has heard from it)."""
    known = iterator._transport._described.get(worker_id)
    return known if known is not None else actor_info(iterator, worker_id)


def test_100_random_resume_points_across_transports(cluster) -> None:
    chooser = random.Random(2026)
    for trial in range(100):
        seed = chooser.randrange(1 << 30)
        expected = batches(make_loader("", 0, seed))
        first = chooser.choice(TRANSPORTS[:3])  # every trial has Ray on one side
        second = chooser.choice(TRANSPORTS)
        if chooser.random() < 0.5:
            first, second = second, first
        stop = chooser.randrange(len(expected) + 1)
        before = make_loader(*first, seed)
        iterator = iter(before)
        got = batches([next(iterator) for _ in range(stop)])
        state = before.state_dict()
        del iterator
        after = make_loader(*second, seed)
        after.load_state_dict(state)
        got += batches(after)
        try:
            assert_same(got, expected)
        except AssertionError as error:
            raise AssertionError(f"trial {trial}: {first} -> {second} at {stop}") from error


def kill_trials(seed: int, restarts: int, kill) -> None:
    """20 epochs on 2 actors, each with ``kill(pid, node id)`` applied to a busy actor after
    a random number of batches: exactly the failure-free batches, and restarts counted."""
    chooser = random.Random(seed)
    for _ in range(20):
        seed = chooser.randrange(1 << 30)
        expected = batches(make_loader("", 0, seed, SLOW_DATASET))
        loader = make_loader("ray", 2, seed, SLOW_DATASET, max_worker_restarts=restarts)
        iterator = iter(loader)
        got = batches([next(iterator) for _ in range(chooser.randrange(6))])
        pid, node_id, _, _ = busy_actor(iterator, chooser.randrange(2))
        kill(pid, node_id)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            got += batches(iterator)
        assert_same(got, expected)
        assert 1 <= iterator.stats().worker_restarts <= restarts


def test_20_actor_kills_deliver_every_sample_once_in_order(cluster) -> None:
    kill_trials(7, 1, lambda pid, node_id: os.kill(pid, signal.SIGKILL))


def test_20_node_kills_deliver_every_sample_once_in_order(cluster) -> None:
    # Both actors may be on the killed node: two restarts.
    kill_trials(11, 2, lambda pid, node_id: cluster.kill_node(node_id))
