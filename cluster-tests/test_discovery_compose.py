"""deploy/docker-compose.discovery.yml: `--scale warren=3` forms one cluster by DNS peer
discovery (docker's embedded DNS answers the service name with every replica's address), and
`--scale warren=5` grows it to five members, each of which sees all five."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time

import pytest
from chaos_cluster import (
    BASE_IMAGE,
    PASSWORD,
    REPO,
    USER,
    ClusterError,
    DockerUnavailable,
    _docker,
    compose_command,
    http,
    prepare_docker,
)
from http_json import HttpError

pytestmark = [pytest.mark.slow, pytest.mark.docker, pytest.mark.timeout(900)]

COMPOSE_FILE = REPO / "deploy" / "docker-compose.discovery.yml"
IMAGE = os.environ.get("WARREN_DISCOVERY_IMAGE", "warren:discovery")  # its own tag: other runs build warren:chaos


class ScaledCluster:
    def __init__(self, image: str) -> None:
        self.project = f"warren-discovery-{os.getpid()}-{secrets.token_hex(3)}"
        self.compose_cmd = compose_command()
        self.env = {**os.environ, "WARREN_IMAGE": image, "WARREN_BASE_IMAGE": BASE_IMAGE,
                    "WARREN_CLUSTER_SECRET": "discovery-" + secrets.token_hex(8),
                    "WARREN_DEFAULT_USER": USER, "WARREN_DEFAULT_PASSWORD": PASSWORD}  # fmt: skip
        self.client = _docker()

    def compose(self, *args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [*self.compose_cmd, "-p", self.project, "-f", str(COMPOSE_FILE), *args]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=self.env, cwd=REPO)
        if check and run.returncode != 0:
            raise ClusterError(
                f"{' '.join(cmd)} failed ({run.returncode}):\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
            )
        return run

    def ips(self) -> list[str]:
        found = self.client.containers.list(filters={"label": [f"com.docker.compose.project={self.project}",
                                                               "com.docker.compose.service=warren"]})  # fmt: skip
        out = []
        for container in found:
            networks = container.attrs["NetworkSettings"]["Networks"]
            out += [n["IPAddress"] for n in networks.values() if n.get("IPAddress")][:1]
        return sorted(out)

    def members(self, ip: str) -> list[str] | None:
        try:
            status = http(ip, 15672, "GET", "/api/cluster", timeout=3)
        except (OSError, HttpError):
            return None
        return sorted(m["node"] for m in status["members"]) if status.get("leader") else None

    def wait_members(self, n: int, timeout: float = 180.0) -> list[str]:
        """Every one of the n replicas reports the same n members, the replicas' own addresses."""
        deadline = time.monotonic() + timeout
        views: dict[str, list[str] | None] = {}
        while time.monotonic() < deadline:
            ips = self.ips()
            expected = sorted(f"{ip}:25672" for ip in ips)
            views = {ip: self.members(ip) for ip in ips}
            if len(ips) == n and all(v == expected for v in views.values()):
                return expected
            time.sleep(1)  # polling containers that start on their own: no event to await
        logs = self.compose("logs", "--no-color", "--tail", "30", check=False).stdout
        raise AssertionError(f"never {n} members everywhere: {views}\n{logs[-6000:]}")


@pytest.fixture(scope="module")
def image() -> str:
    try:
        return prepare_docker(image=IMAGE).image
    except DockerUnavailable as e:
        print(f"\n!!! DOCKER ENGINE UNAVAILABLE: {e}", file=sys.stderr)
        pytest.skip(f"docker engine unavailable: {e}")


def test_scaling_the_service_grows_one_cluster_found_by_dns(image):
    c = ScaledCluster(image)
    try:
        c.compose("up", "-d", "--no-build", "--scale", "warren=3")
        three = c.wait_members(3)
        c.compose("up", "-d", "--no-build", "--scale", "warren=5")
        five = c.wait_members(5)
        assert set(three) < set(five)  # the first three kept their ids: grown, not re-formed
    finally:
        c.compose("down", "-v", "--remove-orphans", "-t", "5", check=False, timeout=120)
