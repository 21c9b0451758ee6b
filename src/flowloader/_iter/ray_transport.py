"""Ray workers (``worker_method="ray"``): ``num_workers`` Ray actors run the worker body on
the cluster this process is connected to, and batches come back through Ray's object store.

Every rule of the epoch stays in this process, in the Epoch: this transport only turns actor
calls into assignments and their outcomes into events. A task is one actor call whose
returned object is the reply; ``receive`` waits on the calls in flight (at most the prefetch
budget) and reads each reply once, dropping its reference at once, so that the batch's
object lives exactly as long as the arrays the consumer holds (no growth over epochs). An
actor's death (its process killed, its node gone) fails its calls with ``RayActorError``:
one WorkerDied, after every reply it finished. Ray restarts nothing and re-runs nothing
(``max_restarts=0``, ``max_task_retries=0``): the Epoch alone decides what is loaded again,
so no batch can come twice.

Arrays read from the object store are read-only views of it; the loader owns each object
(nobody else holds its reference), so they are handed out writable, as with the other
transports, without a copy.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from typing import Any

import numpy as np
import ray

from .._ipc import messages, tree
from .._ipc.batch_codec import SMALL_LEAF_BYTES
from .._plan import LoadPlan
from .._warn import warn_at_user
from .._worker.ray_actor import RayWorker
from .events import Assignment, Event, Failed, WorkerDied, from_reply
from .transport import worker_config

# "ModuleNotFoundError: No module named 'x'": the last such line of a creation task's error.
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception)\b: ")
_TERMINAL_COLOURS = re.compile(r"\x1b\[[0-9;]*m")
# A blocking wait is cut into slices this long, to notice actors the cluster cannot place.
PLACEMENT_CHECK_S = 30.0
DEFAULT_ACTOR_OPTIONS = {"num_cpus": 1}
# For the local instance the loader starts. Ray frees dropped objects in batches, once a
# second by default; until then their memory cannot be reused, so every batch is written to
# fresh object-store pages, and faulting them in cost an actor 31 ms per 38 MB batch here
# against 11 ms with frees every 10 ms (README: the same setting for a cluster).
LOCAL_SYSTEM_CONFIG = {"free_objects_period_milliseconds": 10}
# Fixed: only the Epoch restarts workers and sends batches again, and an actor runs its calls
# one at a time in the order sent (what keeps replies, deaths and epochs in order).
FIXED_ACTOR_OPTIONS = {
    "max_restarts": 0,
    "max_task_retries": 0,
    "max_concurrency": 1,
    "allow_out_of_order_execution": False,
}

_said_how_connected = False


def connect(num_workers: int) -> None:
    """Use the Ray cluster this process is connected to. If there is none, join the cluster
    ``RAY_ADDRESS`` names, or else start a new local instance (on loopback only, without the
    dashboard or usage statistics, with room for ``num_workers`` actors however many cores
    this machine has, as processes would oversubscribe them); say which, once."""
    global _said_how_connected
    if ray.is_initialized():
        return
    address = os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(log_to_driver=False)
        how = f"joined the Ray cluster at RAY_ADDRESS={address}"
    else:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        ray.init(
            address="local",
            num_cpus=max(os.cpu_count() or 1, num_workers),
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            log_to_driver=False,
            _system_config=LOCAL_SYSTEM_CONFIG,
        )
        how = "started a local Ray instance on this machine"
    if not _said_how_connected:
        _said_how_connected = True
        warn_at_user(
            f"worker_method='ray': Ray was not initialized, so the loader {how}. To choose "
            "the cluster, call ray.init(address=...) before iterating over the DataLoader."
        )


def _writable(array: np.ndarray) -> np.ndarray:
    """A writable view of an array read from the object store (the loader's own object); a
    small one (labels) as a copy, so that keeping it keeps no object in the store."""
    if array.flags.writeable:
        return array
    if array.nbytes <= SMALL_LEAF_BYTES:
        return array.copy()
    return np.asarray(_WritableView(array))


class _WritableView:
    """Exposes an array's memory as writable; holds the array, and so its object, alive."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        interface = dict(array.__array_interface__)
        interface["data"] = (interface["data"][0], False)
        self.__array_interface__ = interface


def _opened(batch: Any) -> Any:
    structure, arrays = tree.split(batch)
    if not arrays:
        return batch
    return tree.join(structure, [_writable(array) for array in arrays])


class _Call:
    """An actor call in flight: whose, from which pass, and what it was."""

    __slots__ = ("generation", "kind", "task_id", "worker_id")

    def __init__(self, worker_id: int, generation: int, kind: str, task_id: int = -1) -> None:
        self.worker_id, self.generation, self.kind, self.task_id = (
            worker_id,
            generation,
            kind,
            task_id,
        )


class RayTransport:
    prefetches = True
    worker_method = "ray"

    def __init__(self, plan: LoadPlan, base_seed: int) -> None:
        connect(plan.num_workers)
        self._plan = plan
        try:
            pickled = ray.cloudpickle.dumps(worker_config(plan, 0, base_seed))
        except Exception as error:
            raise TypeError(
                "worker_method='ray' sends the dataset, collate_fn and worker_init_fn to its "
                f"actors pickled, and they cannot be pickled: {error}"
            ) from error
        # Put once for every actor (the dataset is usually the largest part), as bytes: each
        # actor unpickles its own copy, whose arrays are writable (objects read from the
        # store are read-only views of it).
        self._shared: Any = ray.put(pickled)
        options = {**DEFAULT_ACTOR_OPTIONS, **(plan.ray_options or {}), **FIXED_ACTOR_OPTIONS}
        self._actor_class: Any = ray.remote(RayWorker).options(**options)
        self._options = options
        self._calls: dict[Any, _Call] = {}  # ObjectRef -> call, oldest first
        self._actors: list[Any] = [None] * plan.num_workers
        # worker id -> (pid, node id, node address, actor id), once the actor answered
        self._described: dict[int, tuple[int, str, str, str]] = {}
        self._generation = 0
        self._placement_warned = False
        self._closed = False
        for worker_id in range(plan.num_workers):
            self._start(worker_id)

    def _start(self, worker_id: int) -> None:
        actor = self._actor_class.remote(self._shared, worker_id)
        self._actors[worker_id] = actor
        self._described.pop(worker_id, None)
        self._calls[actor.describe.remote()] = _Call(worker_id, self._generation, "describe")

    def send(self, assignments: list[Assignment]) -> None:
        for a in assignments:
            task = messages.Task(
                self._generation, a.task_id, a.indices, epoch_seed=a.epoch_seed, epoch=a.epoch
            )
            ref = self._actors[a.worker_id].run.remote(task)
            self._calls[ref] = _Call(a.worker_id, self._generation, "task", a.task_id)

    def receive(self, timeout: float | None) -> list[Event]:
        ready = self._wait(timeout)
        if not ready:
            return []
        events: list[Event] = []
        ready_set = set(ready)
        for ref in list(self._calls):  # oldest first: a death after the replies before it
            call = self._calls.get(ref)
            if call is None or ref not in ready_set:
                continue
            del self._calls[ref]
            try:
                event = self._outcome(ref, call)
            except Exception as error:  # this reply is lost; the others are not
                event = self._unopened(call, error)
            if event is not None:
                events.append(event)
        return events

    def _wait(self, timeout: float | None) -> list[Any]:
        """The calls that have finished within ``timeout`` (None: until one has)."""
        if not self._calls:  # nothing can arrive
            time.sleep(0.01 if timeout is None else timeout)
            return []
        refs = list(self._calls)
        while True:
            wait_s = PLACEMENT_CHECK_S if timeout is None else timeout
            ready, _ = ray.wait(refs, num_returns=1, timeout=wait_s, fetch_local=False)
            if ready or timeout is not None:
                break
            self._warn_unplaced()
        if ready and len(refs) > 1:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=False)
        return ready

    def _warn_unplaced(self) -> None:
        """Nothing came for a while and some actors never started: say why it waits."""
        unplaced = [w for w in range(len(self._actors)) if w not in self._described]
        if not unplaced or self._placement_warned:
            return
        self._placement_warned = True
        warn_at_user(
            f"worker_method='ray': actors {unplaced} have not started after "
            f"{PLACEMENT_CHECK_S:.0f} s; the cluster may have no room for actor options "
            f"{self._options} (available now: {ray.available_resources()})",
            RuntimeWarning,
        )

    def _outcome(self, ref: Any, call: _Call) -> Event | None:
        worker_id = call.worker_id
        try:
            reply = ray.get(ref)
        except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError) as error:
            # The actor is gone, or the node that held its finished reply (which cannot be
            # made again without running the task again: the Epoch's choice).
            return self._died(worker_id, error)
        if call.kind == "describe":
            self._described[worker_id] = reply
            return None
        if call.generation != self._generation:
            return None  # from an epoch that ended early
        if isinstance(reply, messages.Result):
            return from_reply(reply, _opened(reply.batch))
        return from_reply(reply)

    def _unopened(self, call: _Call, error: Exception) -> Event | None:
        """A reply that could not be read here (a class this process cannot rebuild, a batch
        it cannot open): its batch fails and ends the epoch."""
        if call.kind != "task" or call.generation != self._generation:
            return None
        return Failed(call.task_id, call.worker_id, error, fatal=True)

    def _died(self, worker_id: int, error: BaseException) -> WorkerDied:
        """The actor is gone: one WorkerDied; its other calls are dropped (they fail too)."""
        for ref in [r for r, c in self._calls.items() if c.worker_id == worker_id]:
            del self._calls[ref]
        pid, node_id, address, actor_id = self._described.get(worker_id, (None, "", "", ""))
        actor_id = actor_id or self._actors[worker_id]._actor_id.hex()
        where = f"on node {address} ({node_id[:12]})" if node_id else "before it started"
        who = f"Ray actor {actor_id}" + ("" if pid is None else f", pid {pid}")
        return WorkerDied(worker_id, pid, f"{where}: {_cause(error)}", who=who)

    def restart(self, worker_id: int) -> None:
        old = self._actors[worker_id]
        for ref in [r for r, c in self._calls.items() if c.worker_id == worker_id]:
            del self._calls[ref]
        _kill(old)
        self._start(worker_id)

    def new_epoch(self) -> None:
        self._generation += 1
        for ref in [r for r, c in self._calls.items() if c.kind == "task"]:
            del self._calls[ref]  # stale: an object nobody holds is freed once it is made
        if self._plan.iterable:
            for actor in self._actors:
                actor.resume.remote()

    def stage_readings(self) -> dict[str, float] | None:
        return None

    def shutdown(self, grace_s: float | None = None) -> None:
        if self._closed:
            return
        self._closed = True
        self._calls.clear()
        if ray.is_initialized():
            for actor in self._actors:
                if actor is not None:
                    _kill(actor)
        self._actors = [None] * len(self._actors)
        self._shared = None


def _cause(error: BaseException) -> str:
    """What killed the actor, in a line or two: Ray's first line, its exit type (out of
    memory, say) and the exception its creation task raised where that is why (a dataset
    that cannot be unpickled there)."""
    text = _TERMINAL_COLOURS.sub("", str(error))
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    cause = f"{type(error).__name__}: {lines[0] if lines else ''}"
    details = [line for line in lines[1:] if line.startswith("Worker exit type")]
    details += [line for line in lines[1:] if _EXCEPTION_LINE.match(line)][-1:]
    return f"{cause} ({'; '.join(details)})" if details else cause


def _kill(actor: Any) -> None:
    """Stop an actor now (its process exits; it is not restarted); it may be gone already."""
    with contextlib.suppress(Exception):
        ray.kill(actor, no_restart=True)
