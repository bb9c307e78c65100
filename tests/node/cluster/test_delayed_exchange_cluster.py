"""The x-delayed-message exchange on three `warren server` processes: its delayed
messages are kept in a replicated quorum queue, so killing the leader of that queue's
group (kill -9) loses none of the messages whose publish was accepted: every one
reaches the bound queue once due, through the schedulers of the nodes left."""

from __future__ import annotations

import pytest
from cluster_procs import HttpError
from proton import Message, symbol
from proton.utils import BlockingConnection

pytestmark = pytest.mark.slow

COUNT = 40


def url(node) -> str:
    return f"amqp://guest:guest@127.0.0.1:{node.amqp_port}"


def info(node, name: str) -> dict | None:
    try:
        return node.by_address(node.http("GET", f"/api/queues/%2F/{name}"))
    except (HttpError, OSError):
        return None


def declare_dx_to_target(node) -> None:
    """The delayed exchange `dx` (direct underneath) and the quorum queue `target`, bound with `k`."""
    node.http("PUT", "/api/exchanges/%2F/dx", {"type": "x-delayed-message", "durable": True,
                                               "arguments": {"x-delayed-type": "direct"}})  # fmt: skip
    node.http("PUT", "/api/queues/%2F/target", {"durable": True, "arguments": {"x-queue-type": "quorum"}})
    node.http("POST", "/api/bindings/%2F/e/dx/q/target", {"routing_key": "k"})


def test_killing_the_delay_groups_leader_loses_no_delayed_message(cluster):
    first = cluster[0]
    declare_dx_to_target(first)
    backing = "amq.delayed.dx"
    cluster.wait_for(lambda: (info(first, backing) or {}).get("leader_elected"), 20, "the delay group's leader")
    cluster.wait_for(lambda: (info(first, "target") or {}).get("leader_elected"), 20, "the target's leader")
    # one scheduler (a consumer) per member: each holds its share of the delayed messages
    cluster.wait_for(lambda: (info(first, backing) or {}).get("consumers") == 3, 20, "a scheduler on every member")
    leader_id = info(first, backing)["leader"]
    assert sorted(info(first, backing)["members"]) == sorted(n.id for n in cluster.nodes)
    leader = next(i for i, n in enumerate(cluster.nodes) if n.id == leader_id)
    publisher = cluster[(leader + 1) % 3]
    conn = BlockingConnection(url(publisher), timeout=20)
    try:
        sender = conn.create_sender("/exchanges/dx/k")
        for i in range(COUNT):
            msg = Message(id=i, body=f"m{i}", durable=True)
            msg.annotations = {symbol("x-delay"): 3000 + 50 * i}
            sender.send(msg)  # returns once accepted: replicated to a majority of the delay group
    finally:
        conn.close()
    # every member's scheduler holds some of them (one consumer per member): kill the leader's node
    assert publisher.http("GET", "/api/exchanges/%2F/dx")["messages_delayed"] == COUNT
    held = info(cluster[leader], backing)
    assert held["messages_unacknowledged"] + held["messages_ready"] == COUNT
    cluster.kill9(leader)
    survivor = cluster[(leader + 2) % 3]
    assert every_id_arrives(survivor) == set(range(COUNT))
    cluster.wait_for(lambda: survivor.http("GET", "/api/exchanges/%2F/dx")["messages_delayed"] == 0, 30,
                     "the delay group emptied")  # fmt: skip


def test_delays_waiting_past_a_small_window_survive_killing_a_node(cluster_factory):
    """delayed_message_memory_window=3 on every node: most delayed messages wait in the
    exchange's later queue (replicated like the inbox); killing the node that leads it loses
    none, and every one arrives once due through the schedulers left."""
    cluster = cluster_factory(3, env={"WARREN_DELAYED_MESSAGE_MEMORY_WINDOW": "3"})
    cluster.start()
    first = cluster[0]
    declare_dx_to_target(first)
    later = "amq.delayed-later.dx"
    for name in ("amq.delayed.dx", later, "target"):
        cluster.wait_for(lambda n=name: (info(first, n) or {}).get("leader_elected"), 20, f"{name}'s leader")
    cluster.wait_for(lambda: (info(first, later) or {}).get("consumers") == 3, 20, "a scheduler on every member")
    publisher = next(i for i, n in enumerate(cluster.nodes) if n.id != info(first, later)["leader"])
    conn = BlockingConnection(url(cluster[publisher]), timeout=20)
    try:
        sender = conn.create_sender("/exchanges/dx/k")
        for i in range(COUNT):
            msg = Message(id=i, body=f"m{i}", durable=True)
            msg.annotations = {symbol("x-delay"): 4000 + 50 * i}
            sender.send(msg)  # accepted once a majority of the inbox's group stored it
    finally:
        conn.close()
    # three schedulers hold at most 3 each: the rest were moved to the later queue
    cluster.wait_for(lambda: (info(cluster[publisher], later) or {}).get("messages_ready", 0) >= COUNT - 20, 20,
                     "the delays past the windows in the later queue")  # fmt: skip
    leader = next(i for i, n in enumerate(cluster.nodes) if n.id == info(cluster[publisher], later)["leader"])
    cluster.kill9(leader)
    survivor = cluster[next(i for i in range(3) if i != leader)]
    assert every_id_arrives(survivor) == set(range(COUNT))


def every_id_arrives(node) -> set[int]:
    """The ids `target` gives a consumer on `node` until each of 0..COUNT-1 has come (duplicates
    allowed: at least once), each arrival awaited up to 60 s."""
    conn = BlockingConnection(url(node), timeout=30)
    got: set[int] = set()
    try:
        receiver = conn.create_receiver("/queues/target", credit=100)
        while got != set(range(COUNT)):
            got.add(receiver.receive(timeout=60).id)
            receiver.accept()
    finally:
        conn.close()
    return got
