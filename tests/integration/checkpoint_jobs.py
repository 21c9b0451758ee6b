"""What the checkpoint-stack tests (test_dcp, test_orbax) share: the dataset their loaders
read, and jobs of several processes of one test file on 127.0.0.1 (DCP's gloo ranks, JAX
processes): each process runs the file as a script, ``name`` and ``directory`` its first
arguments, and writes its output as JSON (:func:`write_output`), read back by index."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import flowloader as fl

N, BATCH = 128, 4


class Noisy(fl.Dataset):
    """Sample i: (i, a draw from sample i's generator): the loader's seed shows in every batch."""

    def __len__(self) -> int:
        return N

    def __getitem__(self, index: int) -> tuple[int, float]:
        return index, float(fl.sample_rng().random())


def take(iterator: object, steps: int) -> list[list]:
    """The next ``steps`` batches of ``iterator``, as lists."""
    return [[b.tolist() for b in next(iterator)] for _ in range(steps)]  # type: ignore[call-overload]


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port() -> int:
    """A port on 127.0.0.1 free now (the job's coordinator binds it next)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def output_path(directory: str, name: str, index: int) -> str:
    return f"{directory}/{name}-{index}.json"


def write_output(directory: str, name: str, index: int, result: Any) -> None:
    """What process ``index`` of the job ``name`` hands back (in the script's main)."""
    with open(output_path(directory, name, index), "w") as f:
        json.dump(result, f)


def run_processes(
    script: str,
    name: str,
    directory: str,
    count: int,
    *,
    env: dict[str, str],
    env_of: Callable[[int], dict[str, str]] = lambda index: {},
    argv_of: Callable[[int], list[str]] = lambda index: [],
    timeout_s: float,
) -> list[Any]:
    """Start ``count`` processes of ``script`` (its ``env``, and each one's ``env_of`` and
    ``argv_of``), wait for them, and return their outputs by index; a process that fails
    fails the test with the end of its log."""
    base = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([ROOT, *sys.path]),
        "OMP_NUM_THREADS": "1",
        **env,
    }
    started = [
        subprocess.Popen(
            [sys.executable, script, name, directory, *argv_of(index)],
            env={**base, **env_of(index)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for index in range(count)
    ]
    logs = [process.communicate(timeout=timeout_s)[0] for process in started]
    for process, log in zip(started, logs, strict=True):
        assert process.returncode == 0, log[-3000:]
    outputs = []
    for index in range(count):
        with open(output_path(directory, name, index)) as f:
            outputs.append(json.load(f))
    return outputs
