"""A node in a container runs one worker per core the container may use (issue 36,
node/workers/cores.py), read from the cgroup files docker writes for `--cpus` (a CPU quota) and
`--cpuset-cpus` (the CPUs it may run on), inside the container as a deployment sees them."""

from __future__ import annotations

import os
import re
import time

import pytest
from chaos_cluster import _docker

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.timeout(900)]

HOST_CPUS = len(os.sched_getaffinity(0))
PROBE = "from node.workers.cores import usable_cores; print(usable_cores())"


def cores_in(image: str, **limits) -> int:
    out = _docker().containers.run(image, ["-c", PROBE], entrypoint="/opt/warren/bin/python", remove=True, **limits)
    return int(out.decode().strip())


def test_the_usable_cores_inside_a_container_follow_its_cpu_quota_and_cpuset(docker_image):
    assert cores_in(docker_image) == HOST_CPUS
    assert cores_in(docker_image, nano_cpus=1_000_000_000) == 1  # --cpus 1
    assert cores_in(docker_image, nano_cpus=1_500_000_000) == min(2, HOST_CPUS)  # --cpus 1.5: rounded up
    assert cores_in(docker_image, cpuset_cpus="0") == 1  # --cpuset-cpus 0


@pytest.mark.skipif(HOST_CPUS < 2, reason="needs 2 CPUs for a quota of 1.5 to mean 2 workers")
def test_a_node_given_one_and_a_half_cpus_runs_two_workers_and_given_one_runs_one_process(docker_image):
    for nano_cpus, workers in ((1_500_000_000, 2), (1_000_000_000, 1)):
        container = _docker().containers.run(docker_image, detach=True, nano_cpus=nano_cpus,
                                             environment={"WARREN_LOOPBACK_USERS": ""})  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while "listening on amqp://" not in (logs := container.logs().decode(errors="replace")):
                assert time.monotonic() < deadline, f"the node did not start:\n{logs[-3000:]}"
                time.sleep(0.2)  # a container's output: no event to await from here
            if workers == 2:
                deadline = time.monotonic() + 30
                while "worker 1 of node" not in (logs := container.logs().decode(errors="replace")):
                    assert time.monotonic() < deadline, f"worker 1 did not start:\n{logs[-3000:]}"
                    time.sleep(0.2)
            started = re.findall(r"worker \d+ started, pid", logs)  # the supervisor's
            assert len(started) == (workers if workers > 1 else 0), logs[-3000:]
        finally:
            container.remove(force=True)
