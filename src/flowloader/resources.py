"""What this process may use of the machine, counted the way the kernel limits and counts it:
its cores (CPU affinity, and a container's CPU quota), not ``os.cpu_count()``; its memory (the
machine's, capped by the cgroup's limit); and a process's memory as PSS, its share of every
page it maps.

A container given "2 CPUs" on a 64-core host sees 64 in ``os.cpu_count()`` and, without a
cpuset, in its affinity too; its cgroup's quota (``cpu.max`` in cgroup v2, ``cpu.cfs_quota_us``
over ``cpu.cfs_period_us`` in v1) is what the kernel enforces. A loader sizing its workers or
decoder threads by 64 there oversubscribes 32-fold. Memory is the same: ``/proc/meminfo``
shows the host's, ``memory.max`` (v2) or ``memory.limit_in_bytes`` (v1) is what the OOM killer
enforces.
"""

from __future__ import annotations

import math
import os
from typing import NamedTuple

CGROUP_ROOT = "/sys/fs/cgroup"
SELF_CGROUP = "/proc/self/cgroup"
MEMINFO = "/proc/meminfo"
CPU_CONTROLLERS = ("", "cpu", "cpu,cpuacct", "cpuacct,cpu")


def usable_cores(cgroup_root: str = CGROUP_ROOT, self_cgroup: str = SELF_CGROUP) -> int:
    """Cores this process may run on: its CPU affinity (where the platform tells), capped by
    its cgroup's CPU quota rounded up (a quota of 1.5 CPUs is 2 cores to spread work over)."""
    if hasattr(os, "sched_getaffinity"):
        cores = len(os.sched_getaffinity(0))
    else:
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_quota(cgroup_root, self_cgroup)
    if quota is not None:
        cores = min(cores, max(1, math.ceil(quota)))
    return max(cores, 1)


def cgroup_cpu_quota(
    cgroup_root: str = CGROUP_ROOT, self_cgroup: str = SELF_CGROUP
) -> float | None:
    """The CPUs this process's cgroup may use (quota / period), None when unlimited or not
    told: cgroup v2's ``cpu.max`` of this process's own cgroup, else v1's CFS files."""
    for folder in _own_cgroups(cgroup_root, self_cgroup):
        text = _read(os.path.join(folder, "cpu.max"))
        if text is not None:
            quota, _, period = text.partition(" ")
            if quota == "max" or not period:
                return None
            return int(quota) / int(period)
        quota_text = _read(os.path.join(folder, "cpu.cfs_quota_us"))
        period_text = _read(os.path.join(folder, "cpu.cfs_period_us"))
        if quota_text is not None and period_text is not None:
            quota_us = int(quota_text)
            return None if quota_us <= 0 else quota_us / int(period_text)
    return None


def memory_limit(
    cgroup_root: str = CGROUP_ROOT, self_cgroup: str = SELF_CGROUP, meminfo: str = MEMINFO
) -> int:
    """Bytes of memory this process's machine has, capped by its cgroup's limit (v2's
    ``memory.max``, v1's ``memory.limit_in_bytes``; v1 writes "no limit" as a huge number)."""
    total = _kilobyte_fields(meminfo).get("MemTotal", 0)
    controllers = ("", "memory")
    for folder in _own_cgroups(cgroup_root, self_cgroup, controllers):
        text = _read(os.path.join(folder, "memory.max"))
        if text is None:
            text = _read(os.path.join(folder, "memory.limit_in_bytes"))
        if text is not None and text.isdigit():
            limit = int(text)
            return min(total, limit) if total else limit
    return total


class ProcessMemory(NamedTuple):
    """A process's memory in bytes, as the kernel counts it. ``uss``: the pages only it maps
    (what a forked worker adds: its own heap and the parent's pages it has written to, not
    those it still shares); ``pss``: that plus its share of the shared pages;
    ``private_shmem``: the shared-memory pages in ``uss`` (segments only it maps), reckoned
    for segments mapped by at most two processes."""

    uss: int
    pss: int
    private_shmem: int


def process_memory(pid: int) -> ProcessMemory | None:
    """Process ``pid``'s memory from ``/proc/<pid>/smaps_rollup`` and ``status``; None when
    it cannot be read (the process is gone, or the platform has no smaps)."""
    fields = _kilobyte_fields(f"/proc/{pid}/smaps_rollup")
    if "Pss" not in fields:
        return None
    uss = fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)
    # Pss_Shmem = private + shared / 2 and RssShmem = private + shared, for pages mapped by
    # one process or two (a segment is the worker's, then the main process's too).
    shmem = _kilobyte_fields(f"/proc/{pid}/status").get("RssShmem", 0)
    private_shmem = min(max(2 * fields.get("Pss_Shmem", 0) - shmem, 0), uss)
    return ProcessMemory(uss, fields["Pss"], private_shmem)


def _kilobyte_fields(path: str) -> dict[str, int]:
    """The "Name:  123 kB" lines of a /proc file, in bytes."""
    fields = {}
    for line in (_read(path) or "").splitlines():
        name, _, value = line.partition(":")
        parts = value.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1] == "kB":
            fields[name] = int(parts[0]) * 1024
    return fields


def _own_cgroups(
    cgroup_root: str, self_cgroup: str, controllers: tuple[str, ...] = CPU_CONTROLLERS
) -> list[str]:
    """Where this process's cgroup files for ``controllers`` may be: its own cgroup's folder
    (from ``self_cgroup``), then the root (what a container usually mounts as its own)."""
    folders = []
    text = _read(self_cgroup) or ""
    for line in text.splitlines():
        if line.count(":") < 2:
            continue
        _, listed, path = line.split(":", 2)
        if listed in controllers:
            sub = "" if listed == "" else listed
            folders.append(os.path.join(cgroup_root, sub, path.lstrip("/")))
            folders.append(os.path.join(cgroup_root, sub))
    folders.append(cgroup_root)
    return list(dict.fromkeys(os.path.normpath(f) for f in folders))


def _read(path: str) -> str | None:
    try:
        with open(path) as file:
            return file.read().strip()
    except (OSError, ValueError):
        return None
