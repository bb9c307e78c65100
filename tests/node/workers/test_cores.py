"""The default number of workers: the CPUs this process may run on, capped by the smallest CPU
quota of its cgroup and the cgroups above it (node/workers/cores.py), under cgroup v1 and v2
as a container or a host shows them."""

from __future__ import annotations

import os

import pytest

from node.workers.cores import cgroup_cpu_limit, usable_cores


def tree(root, files: dict[str, str]) -> str:
    for path, text in files.items():
        full = root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(text)
    return str(root)


def test_cgroup_v2_takes_the_smallest_quota_of_its_cgroup_and_those_above(tmp_path):
    root = tree(tmp_path, {
        "proc/self/cgroup": "0::/kubepods/pod1/c1\n",
        "sys/fs/cgroup/cpu.max": "max 100000\n",
        "sys/fs/cgroup/kubepods/cpu.max": "800000 100000\n",
        "sys/fs/cgroup/kubepods/pod1/cpu.max": "150000 100000\n",  # 1.5 CPUs
        "sys/fs/cgroup/kubepods/pod1/c1/cpu.max": "max 100000\n",
    })  # fmt: skip
    assert cgroup_cpu_limit(root) == 1.5
    assert usable_cores(root) == min(2, len(os.sched_getaffinity(0)))  # a fraction rounds up


def test_cgroup_v2_in_a_container_reads_its_own_root(tmp_path):
    """/proc/self/cgroup names the host's path; the container has its cgroup mounted as the root."""
    root = tree(tmp_path, {"proc/self/cgroup": "0::/system.slice/docker-abc.scope\n",
                           "sys/fs/cgroup/cpu.max": "100000 100000\n"})  # fmt: skip
    assert cgroup_cpu_limit(root) == 1.0
    assert usable_cores(root) == 1


def test_cgroup_v1_reads_the_cfs_quota_and_no_quota_is_none(tmp_path):
    limited = tree(tmp_path / "a", {
        "proc/self/cgroup": "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n",
        "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
        "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
        "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "50000\n",
        "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
    })  # fmt: skip
    assert cgroup_cpu_limit(limited) == 0.5
    assert usable_cores(limited) == 1
    free = tree(tmp_path / "b", {"proc/self/cgroup": "1:cpu:/\n", "sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n",
                                 "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n"})  # fmt: skip
    assert cgroup_cpu_limit(free) is None
    assert usable_cores(free) == len(os.sched_getaffinity(0))


def test_no_cgroup_files_leave_the_affinity(tmp_path):
    assert cgroup_cpu_limit(str(tmp_path)) is None
    assert usable_cores(str(tmp_path)) == len(os.sched_getaffinity(0))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs to take one away")
def test_the_affinity_counts_as_taskset_sets_it():
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        assert usable_cores() == 1
    finally:
        os.sched_setaffinity(0, before)
