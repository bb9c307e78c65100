"""Quorum queues on three `warren server` processes: one Raft group per
queue on its three replicas, publishers and consumers on any node, and no
confirmed message lost when the queue's leader is killed."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest
from cluster_procs import HttpError
from confirmed_sends import publish_until_stopped
from proton import Delivery, Message, Timeout
from proton.utils import BlockingConnection
from received import receive_ids

pytestmark = pytest.mark.slow


def url(node) -> str:
    return f"amqp://guest:guest@127.0.0.1:{node.amqp_port}"


def enable_quorum_queues(cluster) -> None:
    cluster[0].http("PUT", "/api/feature_flags/quorum_queue_v1/enable", {})


def declare(cluster, i: int, name: str, **arguments) -> dict:
    cluster[i].http("PUT", f"/api/queues/%2F/{name}", {"durable": True,
                                                       "arguments": {"x-queue-type": "quorum", **arguments}})
    return cluster[i].by_address(cluster[i].http("GET", f"/api/queues/%2F/{name}"))


def info(node, name: str) -> dict | None:
    try:
        return node.by_address(node.http("GET", f"/api/queues/%2F/{name}"))
    except (HttpError, OSError):
        return None


def test_a_quorum_queue_replicates_to_three_nodes_and_serves_clients_on_any(cluster):
    enable_quorum_queues(cluster)
    q = declare(cluster, 0, "qq-basic")
    assert q["type"] == "quorum" and sorted(q["members"]) == sorted(n.id for n in cluster.nodes)
    for node in cluster.nodes:
        cluster.wait_for(lambda node=node: info(node, "qq-basic") is not None, 10, "the queue everywhere")
    conn = BlockingConnection(url(cluster[1]), timeout=10)
    sender = conn.create_sender("/queues/qq-basic")
    for i in range(100):
        sender.send(Message(id=i, body=f"m{i}", durable=True))  # returns once accepted: committed by a majority
    conn.close()
    for node in cluster.nodes:  # every replica applied them
        cluster.wait_for(lambda node=node: info(node, "qq-basic")["messages_ready"] == 100, 10, "100 everywhere")
    conn = BlockingConnection(url(cluster[2]), timeout=10)
    receiver = conn.create_receiver("/queues/qq-basic", credit=7)
    got = []
    for _ in range(100):
        got.append(receiver.receive(timeout=10).id)
        receiver.accept()
    conn.close()
    assert sorted(got) == list(range(100))
    cluster.wait_for(lambda: info(cluster[0], "qq-basic")["messages"] == 0, 10, "the queue drained")


def test_a_replica_cut_off_cannot_confirm(cluster):
    enable_quorum_queues(cluster)
    declare(cluster, 0, "qq-cut")
    cut = 2
    cluster.wait_for(lambda: info(cluster[cut], "qq-cut") is not None, 10, "the queue on node 2")
    conn = BlockingConnection(url(cluster[cut]), timeout=20)  # the group elects within 2-4 s of its start
    sender = conn.create_sender("/queues/qq-cut")
    sender.send(Message(body="before"))
    cluster.partition(cut)
    with pytest.raises(Exception, match="timed out|released"):
        sender.send(Message(body="during"), timeout=3)  # no majority behind it: never accepted
    cluster.heal()
    conn.close()


def confirmed_survive(cluster, queue: str, fault, recover, what: str) -> None:
    """Publish with confirms through one follower and consume through the other while `fault(leader)`
    hits the queue's leader, then `recover(leader)`: every confirmed message is consumed."""
    enable_quorum_queues(cluster)
    declare(cluster, 0, queue)
    for node in cluster.nodes:
        cluster.wait_for(lambda node=node: info(node, queue) is not None, 10, "the queue everywhere")
    leader_id = info(cluster[0], queue)["leader"]
    leader = next(n.index for n in cluster.nodes if n.id == leader_id)
    others = [i for i in range(3) if i != leader]
    pub_node, sub_node = cluster[others[0]], cluster[others[1]]
    confirmed: list[int] = []
    consumed: list[int] = []
    stop = threading.Event()  # the publisher stops
    published = threading.Event()  # the publisher has stopped: `confirmed` is final

    def publish() -> None:
        publish_until_stopped(url(pub_node), f"/queues/{queue}", stop, confirmed)

    def consume() -> None:
        # done only once the publisher is: a send in flight at the stop may still be confirmed
        while not published.is_set() or len(set(consumed)) < len(set(confirmed)):
            conn = None
            try:
                conn = BlockingConnection(url(sub_node), timeout=5)
                receiver = conn.create_receiver(f"/queues/{queue}", credit=50)
                while not published.is_set() or len(set(consumed)) < len(set(confirmed)):
                    try:
                        m = receiver.receive(timeout=3)
                    except Timeout:
                        continue  # nothing yet (an election): the link stays, its credit with it
                    consumed.append(m.id)
                    receiver.accept()
                return
            except Exception:
                time.sleep(0.2)
            finally:
                if conn is not None:  # an abandoned open link would keep taking messages
                    with contextlib.suppress(Exception):
                        conn.close()

    threads = [threading.Thread(target=publish, daemon=True), threading.Thread(target=consume, daemon=True)]
    for t in threads:
        t.start()
    cluster.wait_for(lambda: len(confirmed) >= 200, 30, f"200 confirmed before the {what}")
    fault(leader)
    killed_at = len(confirmed)
    cluster.wait_for(lambda: len(confirmed) >= killed_at + 200, 60, f"publishing resumed after the {what}")
    recover(leader)
    stop.set()
    threads[0].join(30)
    published.set()
    deadline = time.monotonic() + 60
    while len(set(consumed) & set(confirmed)) < len(set(confirmed)) and time.monotonic() < deadline:
        time.sleep(0.2)
    threads[1].join(30)
    lost = set(confirmed) - set(consumed)
    unexpected = set(consumed) - set(range(max(confirmed, default=0) + 2))
    if lost:
        print("\nLOST", sorted(lost)[:10], sorted(lost)[-5:], f"{what} at", killed_at)
        for node in cluster.nodes:
            print(node.index, {k: (info(node, queue) or {}).get(k) for k in
                               ("leader", "messages_ready", "messages_unacknowledged", "consumer_details")})
    print(f"\nconfirmed {len(set(confirmed))}, consumed {len(set(consumed))} ({len(consumed) - len(set(consumed))}"
          f" redelivered), lost {len(lost)}")  # fmt: skip
    assert not lost and not unexpected


def test_kill9_of_the_queue_leader_loses_no_confirmed_message(cluster):
    confirmed_survive(cluster, "qq-chaos", cluster.kill9, cluster.restart, "kill")


def test_a_replica_removed_and_added_back_under_load_loses_no_confirmed_message(cluster):
    """The chaos suite's replica-remove nemesis without docker: the consuming node's replica is
    removed (delete_member, as `warren ctl` and the HTTP API do it) and added back while messages
    flow; its consumer moves to a proxy and back to the replica, and every confirmed message
    is consumed."""

    def member(leader: int):
        return cluster[[i for i in range(3) if i != leader][1]]  # the consuming node

    def change(command: str):
        def run(leader: int) -> None:
            out = cluster.ctl(leader, command, "qq-member-back", member(leader).id)
            assert out.returncode == 0, out.stderr

        return run

    confirmed_survive(cluster, "qq-member-back", change("delete_member"), change("add_member"), "replica removal")


def test_delivery_limit_dead_letters_through_the_leader(cluster):
    enable_quorum_queues(cluster)
    cluster[0].http("PUT", "/api/queues/%2F/dead-q", {"durable": True})
    declare(cluster, 1, "qq-limited", **{"x-delivery-limit": 2, "x-dead-letter-exchange": "",
                                         "x-dead-letter-routing-key": "dead-q"})  # fmt: skip
    cluster.wait_for(lambda: info(cluster[2], "qq-limited") is not None, 10, "the queue on node 2")
    conn = BlockingConnection(url(cluster[2]), timeout=10)
    conn.create_sender("/queues/qq-limited").send(Message(id="poison", body="x", durable=True))
    receiver = conn.create_receiver("/queues/qq-limited", credit=1)
    counts = []
    while len(counts) < 10:
        try:
            m = receiver.receive(timeout=3)
        except Exception:
            break
        counts.append(m.delivery_count)
        receiver.fetcher.unsettled[0].local.failed = True  # modified with delivery-failed: counts toward the limit
        receiver.settle(Delivery.MODIFIED)
    assert counts == [0, 1, 2]  # the header's delivery-count grows with each failed delivery
    dead = conn.create_receiver("/queues/dead-q", credit=1).receive(timeout=10)
    assert dead.id == "poison"
    assert dead.annotations["x-first-death-reason"] == "delivery_limit"
    assert dead.annotations["x-first-death-queue"] == "qq-limited"
    conn.close()


def test_the_rabbitmq_client_declares_and_uses_a_quorum_queue(cluster):
    from rabbitmq_amqp_python_client import AddressHelper, Connection, Converter, QuorumQueueSpecification
    from rabbitmq_amqp_python_client import Message as ClientMessage

    enable_quorum_queues(cluster)
    conn = Connection(f"amqp://guest:guest@127.0.0.1:{cluster[1].amqp_port}/")
    conn.dial()
    try:
        management = conn.management()
        management.declare_queue(QuorumQueueSpecification(name="qq-client", quorum_initial_group_size=3))
        queue = management.queue_info("qq-client")
        # members by node name, or by address while a name is not known yet (cluster_procs.Node.by_address)
        members = [cluster[1].ids_by_name.get(m, m) for m in queue.members]
        assert queue.queue_type.value == "quorum" and sorted(members) == sorted(n.id for n in cluster.nodes)
        assert queue.leader in queue.members
        publisher = conn.publisher(AddressHelper.queue_address("qq-client"))
        for i in range(10):
            publisher.publish(ClientMessage(body=Converter.string_to_bytes(f"m{i}")))
        publisher.close()
        assert management.queue_info("qq-client").message_count == 10
        assert management.purge_queue("qq-client") == 10
        management.delete_queue("qq-client")
        management.close()
    finally:
        conn.close()
    for node in cluster.nodes:
        cluster.wait_for(lambda node=node: info(node, "qq-client") is None, 10, "the queue gone everywhere")


def test_members_are_added_and_removed_and_a_new_member_catches_up(cluster):
    enable_quorum_queues(cluster)
    q = declare(cluster, 0, "qq-grow", **{"x-quorum-initial-group-size": 2})
    assert len(q["members"]) == 2
    outsider = next(n for n in cluster.nodes if n.id not in q["members"])
    conn = BlockingConnection(url(cluster[0]), timeout=10)
    sender = conn.create_sender("/queues/qq-grow")
    for i in range(50):
        sender.send(Message(id=i, body=f"m{i}", durable=True))
    conn.close()
    out = cluster.ctl(0, "add_member", "qq-grow", outsider.id)
    assert out.returncode == 0, out.stderr
    for node in cluster.nodes:
        cluster.wait_for(lambda node=node: len((info(node, "qq-grow") or {}).get("members", [])) == 3, 15,
                         f"three members seen by node {node.index}")  # fmt: skip
    # the new member replays the log it missed: its own copy holds the 50 messages
    cluster.wait_for(lambda: info(outsider, "qq-grow")["messages_ready"] == 50, 15, "the new member caught up")
    # shrink takes it off every quorum queue, grow puts it back
    out = cluster.ctl(0, "shrink", outsider.id, "--json")
    assert out.returncode == 0, out.stderr
    cluster.wait_for(lambda: outsider.id not in info(cluster[0], "qq-grow")["members"], 15, "removed")
    out = cluster.ctl(1, "grow", outsider.id)
    assert out.returncode == 0, out.stderr
    cluster.wait_for(lambda: outsider.id in info(cluster[0], "qq-grow")["members"], 15, "added again")
    cluster.wait_for(lambda: (info(outsider, "qq-grow") or {}).get("messages_ready") == 50, 15, "caught up again")
    out = cluster.ctl(2, "delete_member", "qq-grow", outsider.id)
    assert out.returncode == 0, out.stderr
    cluster.wait_for(lambda: len(info(cluster[0], "qq-grow")["members"]) == 2, 15, "two members again")


def test_two_hundred_quorum_queues_on_three_nodes(cluster):
    enable_quorum_queues(cluster)
    term_before = cluster[0].status()["term"]
    started = time.monotonic()
    for i in range(200):
        cluster[i % 3].http("PUT", f"/api/queues/%2F/many-{i}", {"durable": True,
                                                                 "arguments": {"x-queue-type": "quorum"}})
    declared = time.monotonic() - started
    leaders = {}
    for i in range(200):  # each group elects its first leader 2-4 s after it starts
        leaders[i] = cluster.wait_for(lambda i=i: (q := info(cluster[0], f"many-{i}") or {}).get("leader_elected")
                                      and q["leader"], 15, f"a leader for many-{i}")  # fmt: skip
    conn = BlockingConnection(url(cluster[1]), timeout=20)
    for i in range(200):
        conn.create_sender(f"/queues/many-{i}", name=f"s{i}").send(Message(body=f"to {i}", durable=True))
    conn.close()
    conn = BlockingConnection(url(cluster[2]), timeout=20)
    for i in range(200):
        receiver = conn.create_receiver(f"/queues/many-{i}", credit=1, name=f"r{i}")
        assert receiver.receive(timeout=20).body == f"to {i}"
        receiver.accept()
        receiver.close()
    conn.close()
    # Elections: reported, not asserted. On a busy 2-core machine 200 pysyncobj groups do
    # elect now and then (measured in docs/benchmarks.md, the limit stated in
    # docs/architecture.md); every queue above still took and gave its message.
    changed = [i for i in range(200) if info(cluster[0], f"many-{i}")["leader"] != leaders[i]]
    print(f"\n200 quorum queues declared in {declared:.1f}s; metadata term {term_before} -> "
          f"{cluster[0].status()['term']}; queue leaders changed: {len(changed)}")


def test_pausing_the_queue_leader_loses_no_confirmed_message(cluster):
    confirmed_survive(cluster, "qq-pause", lambda i: cluster[i].pause(), lambda i: cluster[i].resume(),  # past the election
                      "pause")  # fmt: skip


def test_a_node_without_a_replica_reaches_the_queue_when_its_declaring_node_is_gone(cluster_factory):
    """4 nodes, 3 replicas: the fourth node proxies to a replica. The metadata names the
    declaring node as the queue's node; once it is killed, the proxy goes to another replica.
    The fourth node's management API names the queue's members and its leader, before and
    after the kill, as a replica's does (the leaders' announcements, node/cluster/liveness.py)."""
    cluster = cluster_factory(4)
    cluster.start()
    enable_quorum_queues(cluster)
    q = declare(cluster, 0, "qq-proxy")
    outside = next(n for n in cluster.nodes if n.id not in q["members"])
    assert q["leader"] == cluster[0].id and len(q["members"]) == 3
    cluster.wait_for(lambda: (info(cluster[0], "qq-proxy") or {}).get("leader_elected"), 15, "the first election")
    members = sorted(q["members"])

    def outside_names(leader: str) -> bool:
        seen = info(outside, "qq-proxy") or {}
        return (seen.get("leader"), seen.get("leader_elected"), sorted(seen.get("members", []))) == \
            (leader, True, members)  # fmt: skip

    leader = info(cluster[0], "qq-proxy")["leader"]
    cluster.wait_for(lambda: outside_names(leader), 10, f"the node without a replica naming {leader}")
    conn = BlockingConnection(url(outside), timeout=20)
    conn.create_sender("/queues/qq-proxy").send(Message(id=0, body="before", durable=True))
    conn.close()
    cluster.kill9(0)

    def published_again() -> bool:
        try:
            c = BlockingConnection(url(outside), timeout=10)
            try:
                c.create_sender("/queues/qq-proxy").send(Message(id=1, body="after", durable=True), timeout=10)
            finally:
                c.close()
            return True
        except Exception:
            return False  # released while the group elects without node 0: try again

    cluster.wait_for(published_again, 60, "a publish through the node without a replica", interval=0.5)
    replica = next(n for n in cluster.nodes if n.id in members and n.index != 0)

    def new_leader_named() -> bool:
        seen = info(replica, "qq-proxy") or {}
        return seen.get("leader_elected") is True and seen["leader"] != cluster[0].id and outside_names(seen["leader"])

    cluster.wait_for(new_leader_named, 15, "the node without a replica naming the new leader")
    conn = BlockingConnection(url(outside), timeout=20)
    receiver = conn.create_receiver("/queues/qq-proxy", credit=10)
    got = set()
    while got != {0, 1}:
        got.add(receiver.receive(timeout=20).id)
        receiver.accept()
    conn.close()


def test_credit_taken_back_while_a_delivery_is_decided_does_not_starve_the_consumer(cluster):
    """A receiver grants credit and takes it back (FLOW 1, FLOW 0) again and again while
    messages arrive: now and then the queue decides a delivery under the credit of 1 before it
    applies the 0. That delivery goes out all the same ([2.6.7]: it counts against the new
    credit), so the queue's delivery-count stays the link's and a final grant drains every message."""
    from raw_client import RawClient

    enable_quorum_queues(cluster)
    declare(cluster, 0, "qq-credit")
    cluster.wait_for(lambda: (info(cluster[0], "qq-credit") or {}).get("leader_elected"), 15, "the first election")
    total = 100
    publisher = BlockingConnection(url(cluster[1]), timeout=20)
    sender = publisher.create_sender("/queues/qq-credit")
    client = RawClient(cluster[2].amqp_port)
    try:
        client.connect()
        receiver = client.receiver(client.begin(), "/queues/qq-credit")
        for i in range(total):
            sender.send(Message(id=i, body=f"m{i}"), timeout=20)
            receiver.flow(link_credit=1)  # a delivery of message i may be decided under this credit...
            client.flush()
            receiver.flow(link_credit=0)  # ...and meet this FLOW at the link
            client.flush()
        receiver.flow(link_credit=total)
        got = client.receive(total, timeout=30)  # every message still in the queue, or already sent
        assert len(got) == total
    finally:
        client.close()
        publisher.close()


def publish_ids(node, queue: str, n: int) -> None:
    """Messages 0..n-1 (id i, body "m<i>", durable) to `queue` through `node`, each confirmed."""
    conn = BlockingConnection(url(node), timeout=10)
    sender = conn.create_sender(f"/queues/{queue}")
    for i in range(n):
        sender.send(Message(id=i, body=f"m{i}", durable=True))
    conn.close()


def test_a_member_taken_off_gives_back_what_its_consumers_held(cluster):
    """A replica removed while a consumer attached there holds messages unsettled: the
    leader returns them (the chaos suite's replica-remove nemesis found them stuck)."""
    enable_quorum_queues(cluster)
    q = declare(cluster, 0, "qq-taken-off")
    publish_ids(cluster[0], "qq-taken-off", 20)
    holder = next(n for n in cluster.nodes if n.id != q["leader"])
    other = next(n for n in cluster.nodes if n is not holder)
    held = BlockingConnection(url(holder), timeout=10)  # stays open: its consumer never settles
    receiver = held.create_receiver("/queues/qq-taken-off", credit=5)
    taken = [receiver.receive(timeout=10).id for _ in range(5)]
    out = cluster.ctl(other.index, "delete_member", "qq-taken-off", holder.id)
    assert out.returncode == 0, out.stderr
    conn = BlockingConnection(url(other), timeout=10)
    try:
        got = receive_ids(conn.create_receiver("/queues/qq-taken-off", credit=20), 20)
    finally:
        conn.close()
        held.close()
    assert sorted(got) == list(range(20)) and set(taken) <= set(got)


def test_a_member_added_back_lets_go_of_what_its_proxied_consumers_held(cluster):
    """While a node has no replica its consumers attach through a proxy to a replica on another
    node; adding the node back replaces the proxy with its own replica and ends those links. The
    node serving them must hear of it, so that what they held goes back to the queue (the chaos
    suite's replica-remove nemesis found such messages held by a consumer no link stood for)."""
    enable_quorum_queues(cluster)
    q = declare(cluster, 0, "qq-back")
    leader = next(n for n in cluster.nodes if n.id == q["leader"])
    member = next(n for n in cluster.nodes if n is not leader)  # removed and added back
    other = next(n for n in cluster.nodes if n is not leader and n is not member)
    publish_ids(leader, "qq-back", 20)
    out = cluster.ctl(other.index, "delete_member", "qq-back", member.id)
    assert out.returncode == 0, out.stderr
    # the node names itself no member: it uses the queue through another node now
    cluster.wait_for(lambda: member.id not in (info(member, "qq-back") or {}).get("members", [member.id]), 15,
                     "the member knows it has no replica")  # fmt: skip
    proxied = BlockingConnection(url(member), timeout=10)  # its consumer never settles
    receiver = proxied.create_receiver("/queues/qq-back", credit=5)
    taken = [receiver.receive(timeout=10).id for _ in range(5)]
    out = cluster.ctl(other.index, "add_member", "qq-back", member.id)
    assert out.returncode == 0, out.stderr
    conn = BlockingConnection(url(other), timeout=10)
    try:
        got = receive_ids(conn.create_receiver("/queues/qq-back", credit=20), 20)
    finally:
        conn.close()
        with contextlib.suppress(Exception):
            proxied.close()
    assert sorted(got) == list(range(20)) and set(taken) <= set(got)
