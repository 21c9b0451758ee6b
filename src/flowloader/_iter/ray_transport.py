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
so no batch can come twice. One exception, decided here: an actor that died before it
answered at all (its node lost before Ray noticed, so it ran no task) and not by an error in
its creation is placed again with its tasks, without counting as a restart. Actors that no
node can ever hold are refused before they are created (ray_placement.py).

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
from .ray_placement import check_placeable
from .transport import worker_config

# "ModuleNotFoundError: No module named 'x'": the last such line of a creation task's error.
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception)\b: ")
_TERMINAL_COLOURS = re.compile(r"\x1b\[[0-9;]*m")
# A blocking wait is cut into slices this long, to notice actors the cluster cannot place.
PLACEMENT_CHECK_S = 30.0
# How many times one worker's actor is placed again after being lost before it started.
PLACE_AGAIN = 3
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
# The GCS address of the local instance the loader started (None: it started none).
_started_address: str | None = None


def connect(num_workers: int) -> None:
    """Use the Ray cluster this process is connected to. If there is none, join the cluster
    ``RAY_ADDRESS`` names, or else start a new local instance (on loopback only, without the
    dashboard or usage statistics, with room for ``num_workers`` actors however many cores
    this machine has, as processes would oversubscribe them); say which, once."""
    global _said_how_connected, _started_address
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
        _started_address = ray.get_runtime_context().gcs_address
    if not _said_how_connected:
        _said_how_connected = True
        warn_at_user(
            f"worker_method='ray': Ray was not initialized, so the loader {how}. To choose "
            "the cluster, call ray.init(address=...) before iterating over the DataLoader."
        )


def started_here() -> bool:
    """True when the cluster this process uses is the local instance the loader started."""
    return _started_address is not None and ray.get_runtime_context().gcs_address == (
        _started_address
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
    """An actor call in flight: whose, from which pass, and what it was (a task's message,
    to send again if its actor is lost before it starts)."""

    __slots__ = ("generation", "kind", "task", "worker_id")

    def __init__(
        self, worker_id: int, generation: int, kind: str, task: messages.Task | None = None
    ) -> None:
        self.worker_id, self.generation, self.kind, self.task = worker_id, generation, kind, task

    @property
    def task_id(self) -> int:
        return -1 if self.task is None else self.task.task_id


class RayTransport:
    prefetches = True
    worker_method = "ray"

    def __init__(self, plan: LoadPlan, base_seed: int) -> None:
        connect(plan.num_workers)
        self._plan = plan
        options = {**DEFAULT_ACTOR_OPTIONS, **(plan.ray_options or {}), **FIXED_ACTOR_OPTIONS}
        check_placeable(options, plan.num_workers, started_here())  # before anything is put
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
        self._actor_class: Any = ray.remote(RayWorker).options(**options)
        self._options = options
        self._calls: dict[Any, _Call] = {}  # ObjectRef -> call, oldest first
        self._actors: list[Any] = [None] * plan.num_workers
        # worker id -> (pid, node id, node address, actor id), once the actor answered
        self._described: dict[int, tuple[int, str, str, str]] = {}
        self._generation = 0
        self._placement_warned = False
        self._placed_again = [0] * plan.num_workers
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
            self._send_task(a.worker_id, a.task(self._generation))

    def _send_task(self, worker_id: int, task: messages.Task) -> None:
        ref = self._actors[worker_id].run.remote(task)
        self._calls[ref] = _Call(worker_id, self._generation, "task", task)

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
        unplaced = self._unplaced()
        if not unplaced or self._placement_warned:
            return
        self._placement_warned = True
        warn_at_user(
            f"worker_method='ray': actors {unplaced} have not started after "
            f"{PLACEMENT_CHECK_S:.0f} s; the cluster may have no room for actor options "
            f"{self._options} (available now: {ray.available_resources()}); it waits for "
            "an autoscaler to add a node (DataLoader(timeout=...) bounds the wait)",
            RuntimeWarning,
        )

    def _outcome(self, ref: Any, call: _Call) -> Event | None:
        worker_id = call.worker_id
        try:
            reply = ray.get(ref)
        except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError) as error:
            # The actor is gone, or the node that held its finished reply (which cannot be
            # made again without running the task again: the Epoch's choice).
            if self._lost_before_start(worker_id, error):
                self._place_again(worker_id, call, error)
                return None
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

    def _lost_before_start(self, worker_id: int, error: BaseException) -> bool:
        """True for an actor that never answered (so ran no task) and died for a reason
        outside the user's code: its node gone before Ray noticed, not an exception in its
        creation. Such an actor is placed again, at most PLACE_AGAIN times per worker."""
        return (
            worker_id not in self._described
            and isinstance(error, ray.exceptions.RayActorError)
            and not error.actor_init_failed
            and self._placed_again[worker_id] < PLACE_AGAIN
        )

    def _place_again(self, worker_id: int, failed: _Call, error: BaseException) -> None:
        """A new actor for ``worker_id`` runs the tasks its lost actor never ran, in order;
        not a restart (no batch was loaded, none is loaded twice)."""
        calls = [failed] + [c for c in self._calls.values() if c.worker_id == worker_id]
        tasks = sorted(
            (c.task for c in calls if c.task is not None and c.generation == self._generation),
            key=lambda task: task.task_id,
        )
        self._placed_again[worker_id] += 1
        self.restart(worker_id)
        for task in tasks:
            self._send_task(worker_id, task)
        warn_at_user(
            f"worker_method='ray': the actor of worker {worker_id} was lost before it started "
            f"({_cause(error)}); placed it again with its {len(tasks)} task(s) (not counted "
            "as a worker restart: it had loaded nothing)",
            RuntimeWarning,
        )

    def _unplaced(self) -> list[int]:
        """The workers whose actors have not answered yet (not placed, or not started)."""
        return [w for w in range(len(self._actors)) if w not in self._described]

    def waiting_for(self) -> str:
        """Why a wait may be long: the actors that have not started (for timeout errors)."""
        unplaced = self._unplaced()
        if not unplaced:
            return ""
        return (
            f"Ray actors {unplaced} had not started: the cluster had no room for actor "
            f"options {self._options} (available: {ray.available_resources()})"
        )

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
