"""deploy/docker-compose.yml's monitoring profile: Prometheus (Debian's, built on the local
base image) scrapes all three nodes with RabbitMQ's scrape jobs and labels, and the
queries of RabbitMQ's dashboards (their joins on rabbitmq_identity_info) find every node."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request

import pytest
from chaos_cluster import BASE_IMAGE, _free_ports

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]


def prometheus(c, path: str, **params: str) -> dict:
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    with urllib.request.urlopen(f"http://{c.ip('prometheus')}:9090{path}{query}", timeout=5) as r:
        return json.loads(r.read())["data"]


def value(c, promql: str) -> float | None:
    result = prometheus(c, "/api/v1/query", query=promql)["result"]
    return float(result[0]["value"][1]) if result else None


def until(check, what: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            if result:
                return result
        except OSError:
            pass  # Prometheus still starting
        assert time.monotonic() < deadline, f"{what}: never"
        time.sleep(1)


def test_prometheus_scrapes_every_node_as_rabbitmq_s_dashboards_expect(cluster):
    c = cluster
    c.env.update(WARREN_BASE_IMAGE=BASE_IMAGE, WARREN_PROMETHEUS_HOST_PORT=str(_free_ports(1)[0]))
    c.compose("--profile", "monitoring", "build", "prometheus", timeout=600)  # the nodes' image is built already
    c.compose("--profile", "monitoring", "up", "-d", "--no-deps", "--no-build", "prometheus")
    try:

        def all_up():
            targets = prometheus(c, "/api/v1/targets")["activeTargets"]
            return len(targets) == 6 and all(t["health"] == "up" for t in targets) and targets

        targets = until(all_up, "six targets up (two jobs, three nodes)")
        assert {t["labels"]["job"] for t in targets} == {"rabbitmq-server", "rabbitmq-server-detailed"}
        assert {t["labels"]["namespace"] for t in targets} == {"warren"}
        # the Overview's variables and joins, as it writes them
        nodes = 'count(rabbitmq_identity_info{namespace="warren", rabbitmq_endpoint="aggregated"})'
        until(lambda: value(c, nodes) == 3, "identity_info from every node")
        assert value(c, "count(count by (rabbitmq_cluster_permanent_id) (rabbitmq_identity_info))") == 1
        assert value(c, 'count(rabbitmq_identity_info{rabbitmq_endpoint="detailed"})') == 3
        joined = (
            "count(rabbitmq_erlang_uptime_seconds * on(instance, job) group_left(rabbitmq_version, "
            "erlang_version) rabbitmq_build_info * on(instance, job) group_left(rabbitmq_cluster, "
            'rabbitmq_node) rabbitmq_identity_info{namespace="warren", rabbitmq_endpoint="aggregated"})'
        )
        assert value(c, joined) == 3
    finally:
        c.compose("--profile", "monitoring", "rm", "-f", "-s", "-v", "prometheus", check=False)
