"""What this process may use of the machine: its cores, counted the way the scheduler limits
them (CPU affinity, and a container's CPU quota), not ``os.cpu_count()``.

A container given "2 CPUs" on a 64-core host sees 64 in ``os.cpu_count()`` and, without a
cpuset, in its affinity too; its cgroup's quota (``cpu.max`` in cgroup v2, ``cpu.cfs_quota_us``
over ``cpu.cfs_period_us`` in v1) is what the kernel enforces. A loader sizing its workers or
decoder threads by 64 there oversubscribes 32-fold.
"""

from __future__ import annotations

import math
import os

CGROUP_ROOT = "/sys/fs/cgroup"
SELF_CGROUP = "/proc/self/cgroup"


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


def _own_cgroups(cgroup_root: str, self_cgroup: str) -> list[str]:
    """Where this process's cgroup files may be: its own cgroup's folder (from
    ``self_cgroup``), then the root (what a container usually mounts as its own)."""
    folders = []
    text = _read(self_cgroup) or ""
    for line in text.splitlines():
        if line.count(":") < 2:
            continue
        _, controllers, path = line.split(":", 2)
        if controllers in ("", "cpu", "cpu,cpuacct", "cpuacct,cpu"):
            sub = "" if controllers == "" else controllers
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
