"""usable_cores: CPU affinity capped by the cgroup's CPU quota (v2 cpu.max, v1 CFS files),
read from fake cgroup trees."""

from __future__ import annotations

import os

import pytest

from flowloader import resources

AFFINITY = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def tree(tmp_path, files: dict[str, str], self_cgroup: str) -> tuple[str, str]:
    root = tmp_path / "cgroup"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (tmp_path / "self").write_text(self_cgroup)
    return str(root), str(tmp_path / "self")


@pytest.mark.parametrize(
    ("files", "self_cgroup", "quota"),
    [
        ({"box/cpu.max": "150000 100000\n"}, "0::/box\n", 1.5),  # v2, own cgroup
        ({"cpu.max": "50000 100000\n"}, "0::/elsewhere\n", 0.5),  # v2, mounted as root
        ({"cpu.max": "max 100000\n"}, "0::/\n", None),  # v2, unlimited
        (  # v1 with the cpu controller mounted on its own
            {"cpu/cpu.cfs_quota_us": "200000\n", "cpu/cpu.cfs_period_us": "100000\n"},
            "4:memory:/x\n1:cpu:/\n0::/\n",
            2.0,
        ),
        (  # v1, unlimited
            {"cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "cpu,cpuacct/cpu.cfs_period_us": "100000"},
            "2:cpu,cpuacct:/docker/abc\n",
            None,
        ),
        ({}, "garbage\n", None),  # nothing to read
    ],
)
def test_the_quota_is_read_where_the_kernel_keeps_it(tmp_path, files, self_cgroup, quota):
    root, own = tree(tmp_path, files, self_cgroup)
    assert resources.cgroup_cpu_quota(root, own) == quota
    expected = AFFINITY if quota is None else min(AFFINITY, max(1, -(-quota // 1)))
    assert resources.usable_cores(root, own) == expected


def test_a_quota_below_one_core_still_gives_one(tmp_path) -> None:
    root, own = tree(tmp_path, {"cpu.max": "10000 100000"}, "0::/")
    assert resources.usable_cores(root, own) == 1


def test_this_machine() -> None:
    assert 1 <= resources.usable_cores() <= (os.cpu_count() or 1)


@pytest.mark.parametrize(
    ("files", "self_cgroup", "limit"),
    [
        ({"box/memory.max": "1073741824\n"}, "0::/box\n", 1 << 30),  # v2, own cgroup
        ({"memory.max": "max\n"}, "0::/\n", None),  # v2, unlimited: the machine's
        (  # v1 with the memory controller mounted on its own
            {"memory/memory.limit_in_bytes": "536870912\n"},
            "4:memory:/\n1:cpu:/\n",
            1 << 29,
        ),
        ({"memory/memory.limit_in_bytes": str(2**63 - 4096)}, "4:memory:/\n", None),  # v1, none
        ({}, "garbage\n", None),
    ],
)
def test_the_memory_limit_is_the_cgroups_under_the_machines(
    tmp_path, files, self_cgroup, limit
) -> None:
    root, own = tree(tmp_path, files, self_cgroup)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       4194304 kB\nMemFree:        1000 kB\n")
    machine = 4 << 30
    expected = machine if limit is None else min(limit, machine)
    assert resources.memory_limit(root, own, str(meminfo)) == expected


def test_a_process_memory_is_its_uss_and_pss() -> None:
    uss, pss, _ = resources.process_memory(os.getpid())
    held = bytearray(64 << 20)  # written: 64 MB of this process's own pages
    held[::4096] = b"x" * len(held[::4096])
    uss_after, pss_after, private_shmem = resources.process_memory(os.getpid())
    assert 0 < uss <= pss
    assert uss_after - uss >= 60 << 20
    assert pss_after - pss >= 60 << 20
    assert private_shmem < 8 << 20  # a bytearray is no shared memory
    assert resources.process_memory(2**22 + 12345) is None  # no such process
    del held
