"""Batches hold no file descriptor: a consumer keeps 10,000 of them under ``ulimit -n 1024``,
and the process's descriptor count stays flat over an epoch whatever it keeps."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

import flowloader as fl

from .loader_datasets import Arrays

HOLD_SCRIPT = f"""
import os, resource, sys
sys.path.insert(0, {os.path.dirname(os.path.dirname(__file__))!r})
import numpy as np
import flowloader as fl
from integration.loader_datasets import Arrays
assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == 1024
before = len(os.listdir("/proc/self/fd"))
held = list(fl.DataLoader(Arrays(20000), batch_size=2, num_workers=2))
assert len(held) == 10000
after = len(os.listdir("/proc/self/fd"))
total = sum(int(batch["image"][:, 0, 0, 0].sum()) for batch in held)
assert total == sum(range(20000)), total
print(before, after)
"""


def limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))


@pytest.mark.timeout(240)
def test_ten_thousand_held_batches_under_ulimit_1024() -> None:
    done = subprocess.run(
        [sys.executable, "-c", HOLD_SCRIPT],
        capture_output=True,
        text=True,
        timeout=200,
        preexec_fn=limit_descriptors,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    before, after = (int(n) for n in done.stdout.split())
    assert after <= before + 2, (before, after)  # nothing per batch


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("persistent", [False, True])
def test_descriptor_count_stays_flat_while_batches_are_kept(persistent) -> None:
    loader = fl.DataLoader(Arrays(400), batch_size=2, num_workers=2, persistent_workers=persistent)
    kept, counts = [], []
    for _ in range(2):
        iterator = iter(loader)
        counts.append(open_descriptors())
        for i, batch in enumerate(iterator):
            kept.append(batch)
            if i % 50 == 0:
                counts.append(open_descriptors())
        del iterator
    # A live iterator holds two pipe ends and a sentinel per worker, whatever is kept.
    assert max(counts) - min(counts) <= 6, counts
    assert len(kept) == 400
    last = kept[-1]
    for _ in loader:  # after `break`-style early exits too, the kept batch holds nothing
        break
    assert float(last["image"][1, 0, 0, 0]) == 399.0
