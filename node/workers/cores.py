"""How many cores this process may use: the default number of workers (issue 36).

`os.sched_getaffinity` says which CPUs the scheduler may run it on (taskset, a
cpuset such as `docker --cpuset-cpus`); a CPU quota (`docker --cpus`,
Kubernetes' CPU limit) caps the time it gets without hiding any CPU, and is
read from the cgroup: `cpu.max` ("QUOTA PERIOD" or "max PERIOD") under cgroup
v2, `cpu.cfs_quota_us` and `cpu.cfs_period_us` (-1: none) under v1. The
process's own cgroup and every one above it may set one; the smallest wins.
A fraction is rounded up (1.5 CPUs: 2 workers, each busy part of the time)."""

from __future__ import annotations

import math
import os

__all__ = ["cgroup_cpu_limit", "usable_cores"]

MAX_WORKERS = 64


def usable_cores(root: str = "/") -> int:
    """The CPUs this process may run on, capped by its cgroup's quota; 1 to MAX_WORKERS."""
    cpus = len(os.sched_getaffinity(0))
    limit = cgroup_cpu_limit(root)
    if limit is not None:
        cpus = min(cpus, math.ceil(limit))
    return max(1, min(cpus, MAX_WORKERS))


def cgroup_cpu_limit(root: str = "/") -> float | None:
    """The smallest CPU quota (in CPUs) over this process's cgroup and its ancestors; None: none."""
    limits = []
    for line in _read(os.path.join(root, "proc/self/cgroup")).splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            limits += _walk(os.path.join(root, "sys/fs/cgroup"), path, _v2_limit)
        elif "cpu" in controllers.split(","):
            for mount in (controllers, "cpu", "cpu,cpuacct"):
                base = os.path.join(root, "sys/fs/cgroup", mount)
                if os.path.isdir(base):
                    limits += _walk(base, path, _v1_limit)
                    break
    return min(limits, default=None)


def _walk(base: str, path: str, limit_of) -> list[float]:
    """The limits set from the cgroup `path` under `base` up to `base` itself. Inside a container
    `path` may name the host's view of a cgroup the container sees as `base`: then `base` alone."""
    here = os.path.join(base, path.strip("/"))
    if not os.path.isdir(here):
        here = base
    found = []
    while True:
        limit = limit_of(here)
        if limit is not None:
            found.append(limit)
        if os.path.samefile(here, base):
            return found
        here = os.path.dirname(here)


def _v2_limit(directory: str) -> float | None:
    quota, _, period = _read(os.path.join(directory, "cpu.max")).partition(" ")
    if not quota or quota == "max":
        return None
    return int(quota) / int(period)


def _v1_limit(directory: str) -> float | None:
    quota = _read(os.path.join(directory, "cpu.cfs_quota_us")).strip()
    period = _read(os.path.join(directory, "cpu.cfs_period_us")).strip()
    if not quota or not period or int(quota) <= 0:
        return None
    return int(quota) / int(period)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""
