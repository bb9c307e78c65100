"""The operator's upgrade tools on three `warren server` processes: where new quorum-queue
leaders go (x-queue-leader-locator, the policy key), `warren ctl drain` / `revive`,
`warren ctl rebalance`, and a SIGTERM that hands leaderships over before the node exits."""

from __future__ import annotations

import json
import socket
from collections import Counter

import pytest
from cluster_procs import HttpError
from proton import Message
from proton.utils import BlockingConnection, ConnectionClosed

pytestmark = pytest.mark.slow


def url(node) -> str:
    return f"amqp://guest:guest@127.0.0.1:{node.amqp_port}"


def declare(cluster, i: int, name: str, **arguments) -> None:
    cluster[i].http("PUT", f"/api/queues/%2F/{name}", {"durable": True,
                                                       "arguments": {"x-queue-type": "quorum", **arguments}})


def leader(cluster, i: int, name: str) -> str | None:
    """The leader of queue `name` as node i knows it, once one is elected."""
    try:
        q = cluster[i].by_address(cluster[i].http("GET", f"/api/queues/%2F/{name}"))
    except (HttpError, OSError):
        return None
    return q["leader"] if q.get("leader_elected") else None


def wait_leader(cluster, name: str, expected: str | None = None, i: int = 0, avoid: str | None = None) -> str:
    def settled():
        got = leader(cluster, i, name)
        if got is None or (expected is not None and got != expected) or got == avoid:
            return None
        return got

    return cluster.wait_for(settled, 20, f"queue {name} led by {expected or 'some node'}")


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def ok(result) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_leaders_go_where_the_locator_says(cluster):
    ids = [n.id for n in cluster.nodes]
    for i in range(3):  # client-local, the default: the node the declaration came to
        declare(cluster, i, f"local-{i}")
    for i in range(3):
        wait_leader(cluster, f"local-{i}", ids[i])
    for k in range(6):  # balanced, asked of node 0 only: the members end up leading evenly
        declare(cluster, 0, f"bal-{k}", **{"x-queue-leader-locator": "balanced"})
    leaders = Counter(wait_leader(cluster, n) for n in [f"local-{i}" for i in range(3)] + [f"bal-{k}" for k in range(6)])
    assert leaders == {ids[0]: 3, ids[1]: 3, ids[2]: 3}
    cluster[0].http("PUT", "/api/policies/%2F/spread", {"pattern": "^pol-", "apply-to": "quorum_queues",
                                                        "definition": {"queue-leader-locator": "balanced"}})
    for k in range(3):
        declare(cluster, 0, f"pol-{k}")  # no argument: the policy's key decides
    assert {wait_leader(cluster, f"pol-{k}") for k in range(3)} == set(ids)
    with pytest.raises(HttpError) as e:
        declare(cluster, 0, "bad", **{"x-queue-leader-locator": "anywhere"})
    assert e.value.status == 400 and "x-queue-leader-locator" in str(e.value)


def test_drain_moves_clients_and_leaders_away_and_revive_and_rebalance_bring_them_back(cluster):
    ids = [n.id for n in cluster.nodes]
    names = [f"q{k}" for k in range(6)]
    for name in names:
        declare(cluster, 1, name)  # client-local: node 1 leads them all
    for name in names:
        wait_leader(cluster, name, ids[1])
    conn = BlockingConnection(url(cluster[1]), timeout=10)
    conn.create_sender("/queues/q0").send(Message(body="before", durable=True))

    report = json.loads(ok(cluster.ctl(1, "--json", "drain")))
    assert report["done"] is True and report["state"] == "drained" and report["still_leading"] == []
    assert report["connections_closed"] >= 1 and report["no_successor"] == []
    assert len([g for g in report["moved"] if g.startswith("qq.")]) == 6
    assert all(new in (ids[0], ids[2]) for new in report["moved"].values())
    with pytest.raises(ConnectionClosed, match="amqp:connection:forced"):
        conn.wait(lambda: False, timeout=10)
    conn.close()
    assert refused(cluster[1].amqp_port)
    for name in names:  # the others agree: node 1 leads nothing
        assert leader(cluster, 0, name) in (ids[0], ids[2]) and leader(cluster, 2, name) in (ids[0], ids[2])
    assert cluster[0].http("GET", "/api/maintenance")["drained_peers"] == [ids[1]]
    declare(cluster, 0, "while-drained", **{"x-queue-leader-locator": "balanced"})
    assert wait_leader(cluster, "while-drained") != ids[1]  # balanced placement passes a drained node over
    conn = BlockingConnection(url(cluster[0]), timeout=10)  # the queues serve through the other nodes
    conn.create_sender("/queues/q0").send(Message(body="during", durable=True))
    receiver = conn.create_receiver("/queues/q0", credit=2)
    assert sorted(receiver.receive(timeout=10).body for _ in range(2)) == ["before", "during"]
    receiver.accept()
    conn.close()

    ok(cluster.ctl(1, "revive"))
    assert not refused(cluster[1].amqp_port)
    assert cluster[0].http("GET", "/api/maintenance")["drained_peers"] == []
    rows = json.loads(ok(cluster.ctl(0, "--json", "rebalance")))
    assert rows and all(r["ok"] for r in rows), rows
    assert any(r["to"] == ids[1] for r in rows)
    leaders = Counter(wait_leader(cluster, n) for n in [*names, "while-drained"])
    assert max(leaders.values()) - min(leaders[i] for i in ids) <= 1, leaders  # 7 queues: 3, 2, 2


def test_a_drained_node_that_restarts_serves_and_the_others_know_it(cluster):
    ids = [n.id for n in cluster.nodes]
    ok(cluster.ctl(2, "drain"))
    cluster.wait_for(lambda: cluster[0].http("GET", "/api/maintenance")["drained_peers"] == [ids[2]], 10,
                     "node 0 told that node 2 drains")  # fmt: skip
    assert cluster.stop(2) == 0
    for i in (0, 1):
        cluster.wait_for(lambda i=i: cluster[i].http("GET", "/api/maintenance")["drained_peers"] == [], 20,
                         f"node {i} forgetting it once its stream ended")  # fmt: skip
    cluster.restart(2)  # the upgrade's new binary: out of maintenance from the start
    assert cluster[2].http("GET", "/api/maintenance")["state"] == "serving"
    assert not refused(cluster[2].amqp_port)
    names = [f"after-restart-{k}" for k in range(3)]
    for name in names:  # each placed by node 0, which counts the ones before it
        declare(cluster, 0, name, **{"x-queue-leader-locator": "balanced"})
    assert {wait_leader(cluster, name) for name in names} == set(ids)  # node 2 among them


def test_sigterm_hands_the_leaderships_over_before_the_node_exits(cluster):
    ids = [n.id for n in cluster.nodes]
    names = [f"t{k}" for k in range(3)]
    for name in names:
        declare(cluster, 2, name)
    for name in names:
        wait_leader(cluster, name, ids[2])
    assert cluster.stop(2) == 0
    log = cluster[2].log_path.read_text()
    assert "leaderships handed over, 0 not in time" in log, cluster.logs()
    for name in names:
        assert wait_leader(cluster, name, avoid=ids[2]) in (ids[0], ids[1])
