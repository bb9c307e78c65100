"""`warren migrate` against the real thing: a private RabbitMQ 3.10 (Debian's
rabbitmq-server with its AMQP 1.0 plugin, run by bench/rabbitmq.py) with
queues, an exchange, bindings, a user and a policy is moved into a Warren
node by the command as an operator runs it (a subprocess)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cluster_procs import free_ports
from rabbit_setup import rabbit_node_class
from shovel_helpers import publish, receive, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def rabbit():
    RabbitNode = rabbit_node_class()
    amqp, mgmt, dist = free_ports(3)
    node = RabbitNode(
        amqp_port=amqp, mgmt_port=mgmt, dist_port=dist, nodename=f"warren_migrate_{os.getpid()}@localhost"
    )
    with node:
        yield node


def migrate_cmd(rabbit, node, *extra: str) -> list[str]:
    return [sys.executable, "-m", "node.cli", "migrate", "--from", f"http://guest:guest@127.0.0.1:{rabbit.mgmt_port}",
            "--amqp", f"amqp://guest:guest@127.0.0.1:{rabbit.amqp_port}", "--host", "127.0.0.1",
            "--port", str(node.broker.http_port), "--interval", "0.5", *extra]  # fmt: skip


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=REPO)


def rabbit_counts(rabbit, expected: dict[str, int], vhost: str = "/") -> None:
    """RabbitMQ's statistics lag its queues by seconds: wait until they show what was published."""
    wait_until(lambda: all(rabbit.api("GET", f"/api/queues/{'%2F' if vhost == '/' else vhost}/{q}").get("messages")
                           == n for q, n in expected.items()), 30, f"RabbitMQ counting {expected}")  # fmt: skip


def http_publish(rabbit, vhost: str, queue: str, bodies: list[str]) -> None:
    for body in bodies:
        rabbit.api("POST", f"/api/exchanges/{vhost}/amq.default/publish",
                   {"properties": {"delivery_mode": 2}, "routing_key": queue, "payload": body,
                    "payload_encoding": "string"})  # fmt: skip


def populate(rabbit) -> None:
    api = rabbit.api
    api("PUT", "/api/vhosts/shop", {})
    api("PUT", "/api/permissions/shop/guest", {"configure": ".*", "write": ".*", "read": ".*"})
    api("PUT", "/api/users/alice", {"password": "alice-pw", "tags": "management"})
    api("PUT", "/api/permissions/%2F/alice", {"configure": "", "write": ".*", "read": ".*"})
    api("PUT", "/api/policies/%2F/cap", {"pattern": "^orders$", "definition": {"max-length": 100000},
                                         "apply-to": "queues"})  # fmt: skip
    rabbit.declare_queue("orders", durable=True)
    rabbit.declare_queue("empty", durable=True)
    rabbit.declare_queue("votes", durable=True, queue_type="quorum")
    api("PUT", "/api/queues/shop/invoices", {"durable": True})
    api("PUT", "/api/exchanges/%2F/shop.x", {"type": "topic", "durable": True})
    api("POST", "/api/bindings/%2F/e/shop.x/q/orders", {"routing_key": "o.#"})
    url = f"amqp://guest:guest@127.0.0.1:{rabbit.amqp_port}"
    publish(url, "/amq/queue/orders", [f"order-{i}" for i in range(300)])
    publish(url, "/amq/queue/votes", [f"vote-{i}" for i in range(40)])
    http_publish(rabbit, "shop", "invoices", [f"invoice-{i}" for i in range(20)])
    rabbit_counts(rabbit, {"orders": 300, "votes": 40, "empty": 0})
    rabbit_counts(rabbit, {"invoices": 20}, "shop")


def test_a_rabbitmq_moves_into_warren(rabbit, node, api):
    populate(rabbit)
    done = run(migrate_cmd(rabbit, node))
    assert done.returncode == 0, done.stderr + done.stdout
    assert "done: 360 messages moved from 3 queue(s)" in done.stdout
    assert "progress orders:" in done.stdout  # not a terminal: plain lines
    # the definitions are in Warren
    assert api.get("/api/queues/%2F/votes").body["type"] == "quorum"
    assert api.get("/api/queues/%2F/empty").body["messages"] == 0
    assert api.get("/api/exchanges/%2F/shop.x").body["type"] == "topic"
    [binding] = api.get("/api/exchanges/%2F/shop.x/bindings/source").body
    assert (binding["destination"], binding["routing_key"]) == ("orders", "o.#")
    assert api.get("/api/policies/%2F/cap").body["definition"] == {"max-length": 100000}
    assert api.as_user("alice", "alice-pw").get("/api/whoami").status == 200  # her RabbitMQ password
    # every message moved, in order, and the shovels are gone
    assert [m.body for m in receive(node.url, "/queues/orders", 300)] == [f"order-{i}" for i in range(300)]
    assert [m.body for m in receive(node.url, "/queues/votes", 40)] == [f"vote-{i}" for i in range(40)]
    assert api.get("/api/queues/shop/invoices").body["messages"] == 20
    assert api.get("/api/shovels").body == []
    assert api.get("/api/parameters/shovel").body == []
    rabbit_counts(rabbit, {"orders": 0, "votes": 0})
    rabbit_counts(rabbit, {"invoices": 0}, "shop")


def test_follow_moves_what_is_published_after_the_start(rabbit, node, api):
    rabbit.declare_queue("orders", durable=True)
    url = f"amqp://guest:guest@127.0.0.1:{rabbit.amqp_port}"
    publish(url, "/amq/queue/orders", [f"early-{i}" for i in range(50)])
    rabbit_counts(rabbit, {"orders": 50})
    proc = subprocess.Popen(migrate_cmd(rabbit, node, "--follow"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO)  # fmt: skip
    try:
        wait_until(lambda: [s["state"] for s in api.get("/api/shovels").body] == ["running"], 60, "the shovel")
        publish(url, "/amq/queue/orders", [f"late-{i}" for i in range(50)])
        bodies = [m.body for m in receive(node.url, "/queues/orders", 100, timeout=60)]
        assert bodies == [f"early-{i}" for i in range(50)] + [f"late-{i}" for i in range(50)]
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the shovel keeps running, and it says so
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "the shovels keep running" in out
    assert [s["name"] for s in api.get("/api/shovels").body] == ["migrate-orders"]
    stop = run(migrate_cmd(rabbit, node, "--stop"))
    assert stop.returncode == 0 and "deleted shovel migrate-orders" in stop.stdout, stop.stderr
    assert api.get("/api/shovels").body == []


def test_what_warren_refuses_stops_the_migration_by_name(rabbit, node, api):
    # classic mirroring: RabbitMQ 3.10 keeps it, Warren (like RabbitMQ 4) has no such policy key
    rabbit.api("PUT", "/api/policies/%2F/mirror", {"pattern": "^orders$", "definition": {"ha-mode": "all"}})
    rabbit.declare_queue("orders", durable=True)
    publish(f"amqp://guest:guest@127.0.0.1:{rabbit.amqp_port}", "/amq/queue/orders", ["kept in RabbitMQ"])
    rabbit_counts(rabbit, {"orders": 1})
    refused = run(migrate_cmd(rabbit, node))
    assert refused.returncode == 65, refused.stdout + refused.stderr
    assert "policy 'mirror'" in refused.stderr and "'ha-mode'" in refused.stderr
    assert "Nothing was moved" in refused.stderr
    assert api.get("/api/shovels").body == [] and api.get("/api/queues/%2F/orders").status == 404
    # a queue left out is said, with the messages that stay behind in RabbitMQ
    held = run(migrate_cmd(rabbit, node, "--skip", "policies:mirror", "--skip", "queues:orders"))
    assert held.returncode == 0, held.stderr
    assert "skipped queue 'orders' in vhost '/'" in held.stdout
    assert "not moved: queue 'orders' in vhost '/' (1 messages)" in held.stdout
    assert api.get("/api/queues/%2F/orders").status == 404
    # the operator leaves the policy out by name: it is said, and the rest moves
    skipped = run(migrate_cmd(rabbit, node, "--skip", "policies:mirror"))
    assert skipped.returncode == 0, skipped.stderr
    assert "skipped policy 'mirror' in vhost '/'" in skipped.stdout
    assert api.get("/api/policies/%2F/mirror").status == 404
    assert [m.body for m in receive(node.url, "/queues/orders", 1)] == ["kept in RabbitMQ"]
    # a --skip naming nothing is an error, not a silent no-op
    wrong = run(migrate_cmd(rabbit, node, "--skip", "policies:nope"))
    assert wrong.returncode == 64 and "no such item" in wrong.stderr


def test_three_vhosts_twenty_queues_and_every_user_logs_in_with_their_password(rabbit, node, api):
    """The issue's estate: 3 vhosts, 20 queues, users, policies and bindings."""
    api_r = rabbit.api
    vhosts = ["/", "shop", "billing"]
    users = {"alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
    for name, password in users.items():
        api_r("PUT", f"/api/users/{name}", {"password": password, "tags": "management"})
    queues = {}
    for i in range(20):
        vhost = vhosts[i % 3]
        queues.setdefault(vhost, []).append(f"q{i}")
    for vhost in vhosts:
        v = "%2F" if vhost == "/" else vhost
        if vhost != "/":
            api_r("PUT", f"/api/vhosts/{v}", {})
            api_r("PUT", f"/api/permissions/{v}/guest", {"configure": ".*", "write": ".*", "read": ".*"})
        for user in users:
            api_r("PUT", f"/api/permissions/{v}/{user}", {"configure": "", "write": ".*", "read": ".*"})
        api_r("PUT", f"/api/policies/{v}/limit", {"pattern": "^q", "definition": {"max-length": 5000},
                                                  "apply-to": "queues"})  # fmt: skip
        api_r("PUT", f"/api/exchanges/{v}/events", {"type": "direct", "durable": True})
        for q in queues[vhost]:
            api_r("PUT", f"/api/queues/{v}/{q}", {"durable": True})
            api_r("POST", f"/api/bindings/{v}/e/events/q/{q}", {"routing_key": q})
            http_publish(rabbit, v, q, [f"{vhost}:{q}:{n}" for n in range(3)])
    for vhost in vhosts:
        rabbit_counts(rabbit, {q: 3 for q in queues[vhost]}, vhost)
    done = run(migrate_cmd(rabbit, node))
    assert done.returncode == 0, done.stderr + done.stdout
    assert "done: 60 messages moved from 20 queue(s)" in done.stdout
    for vhost in vhosts:
        v = "%2F" if vhost == "/" else vhost
        for q in queues[vhost]:
            assert api.get(f"/api/queues/{v}/{q}").body["messages"] == 3
            [b] = [b for b in api.get(f"/api/queues/{v}/{q}/bindings").body if b["source"] == "events"]
            assert b["routing_key"] == q
        assert api.get(f"/api/policies/{v}/limit").body["definition"] == {"max-length": 5000}
    for user, password in users.items():
        assert api.as_user(user, password).get("/api/whoami").status == 200, user
    assert api.get("/api/shovels").body == []
