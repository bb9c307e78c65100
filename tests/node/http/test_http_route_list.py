"""Every route of RabbitMQ 4.2's management API (docs/rabbitmq-4.2-http-routes.txt,
from its dispatcher) against Warren: a route marked served is in Warren's
route table with each of its methods and answers GET as RabbitMQ does
(200, or 405 where GET is not one of its methods); a route marked absent
is not in the table and answers 404, as an unknown path does."""

from __future__ import annotations

import re
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from proton.utils import BlockingConnection

from node.http.api import ROUTES

ROUTE_LIST = Path(__file__).resolve().parents[3] / "docs" / "rabbitmq-4.2-http-routes.txt"


def _routes() -> list[tuple[list[str], str, bool]]:
    out = []
    for line in ROUTE_LIST.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        methods, path, status = line.split(None, 2)
        assert status == "served" or status.startswith("absent: "), line
        out.append((methods.split(","), path, status == "served"))
    return out


def _shape(path: str) -> str:
    """A path with every parameter as {} and no trailing slash."""
    return re.sub(r"\{[^}]*\}|:[a-z_]+", "{}", path).rstrip("/")


def test_the_list_is_rabbitmqs_whole_dispatcher():
    routes = _routes()
    assert len(routes) > 110
    assert len({path for _, path, _ in routes}) == len(routes)


def test_warren_serves_exactly_the_routes_marked_served():
    table = {(method, _shape(path)) for method, path, _ in ROUTES}
    for methods, path, served in _routes():
        for method in methods:
            assert ((method, _shape(path)) in table) == served, (
                f"{method} {path} should be {'served' if served else 'absent'}"
            )


@pytest.fixture
def walk(api, node):
    """The objects the routes' parameters name."""
    api.put("/api/queues/%2F/walk-q")
    api.put("/api/queues/%2F/walk-qq", {"arguments": {"x-queue-type": "quorum"}})
    api.post("/api/bindings/%2F/e/amq.direct/q/walk-q", {"routing_key": "k"})
    api.put("/api/policies/%2F/walk-p", {"pattern": "^nothing$", "definition": {"max-length": 1}})
    api.put("/api/operator-policies/%2F/walk-op", {"pattern": "^nothing$", "definition": {"max-length": 1}})
    api.put("/api/parameters/vhost-limits/%2F/limits", {"value": {"max-queues": 100}})
    api.put("/api/global-parameters/cluster_name", {"value": "walk"})
    api.put("/api/parameters/shovel/%2F/walk-s", {"value": {"src-protocol": "local", "src-uri": "amqp://",
                                                             "src-queue": "walk-q", "dest-protocol": "local",
                                                             "dest-uri": "amqp://", "dest-queue": "walk-s-dest"}})
    api.put("/api/topic-permissions/%2F/guest", {"exchange": "amq.topic", "write": ".*", "read": ".*"})
    api.put("/api/user-limits/guest/max-connections", {"value": 100})
    conn = BlockingConnection(f"amqp://guest:guest@127.0.0.1:{node.broker.amqp_port}", timeout=10)
    [c] = api.get("/api/connections").body
    deadline = time.monotonic() + 15  # the quorum queue's status needs its leader
    while api.get("/api/health/checks/quorum-queues-without-elected-leaders/all-vhosts/").status != 200:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    yield {"node": "warren@test", "vhost": "%2F", "queue": "walk-q", "destination": "walk-q", "exchange": "amq.direct",
           "source": "amq.direct", "dtype": "q", "props": "k", "connection": quote(c["name"], safe=""),
           "username": "guest", "user": "guest", "channel": "none", "within": "1", "unit": "days",
           "port": str(node.broker.amqp_port), "protocols": "amqp", "pattern": ".*", "filter": "x", "password": "x",
           "component": "vhost-limits"}  # fmt: skip
    conn.close()


_NAMES = {"/api/parameters/": "limits", "/api/global-parameters/": "cluster_name", "/api/policies/": "walk-p",
          "/api/operator-policies/": "walk-op", "/api/vhost-limits/": "max-queues", "/api/user-limits/": "max-connections",
          "/api/feature-flags/": "all", "/api/shovels/": "walk-s"}  # fmt: skip


def _fill(path: str, values: dict) -> str:
    def value(m: re.Match) -> str:
        key = m.group(1)
        if key == "name":
            return next(v for prefix, v in _NAMES.items() if path.startswith(prefix))
        if key == "queue" and "/quorum/" in path:
            return "walk-qq"
        if key == "exchange" and path.startswith("/api/topic-permissions/"):
            return "amq.topic"
        return values[key]

    return re.sub(r":([a-z_]+)", value, path)


def test_each_route_answers_get_as_rabbitmq(api, walk):
    wrong = []
    for methods, path, served in _routes():
        url = _fill(path, walk)
        r = api.get(url)
        if not served:
            expected = 404
        elif "GET" not in methods:
            expected = 405
        elif path == "/api/channels/:channel":
            expected = 404  # no channel exists
        else:
            expected = 200
        if r.status != expected:
            wrong.append(f"GET {url}: {r.status}, expected {expected}: {r.body}")
    assert not wrong, "\n".join(wrong)
