"""Replicated streams on three `warren server` processes: chunks on every
replica byte for byte, no confirmed message lost when the leader is
killed with kill -9 while publishing, and a replica cut off catching up.

The replicas' logs are read straight from each node's data directory
(tests/support/stream_logs.py), so the test sees what each node has on
disk, not what a proxy reports."""

from __future__ import annotations

import threading

import pytest
from cluster_procs import HttpError
from confirmed_sends import publish_until_stopped
from proton import Described, Message, Timeout, symbol, ulong
from proton.reactor import Filter
from proton.utils import BlockingConnection
from received import receive_ids
from stream_logs import (
    chunks_on,
    declare,
    ids_on,
    info,
    leader_of,
    same_everywhere,
    stream_dir,
    two_replica_stream,
    url,
)

pytestmark = pytest.mark.slow
OFFSET_SPEC = symbol("rabbitmq:stream-offset-spec")


def test_a_stream_is_replicated_to_three_nodes_byte_for_byte(cluster):
    declare(cluster, 0, "s-basic")
    cluster.wait_for(lambda: leader_of(cluster, "s-basic"), 10, "the stream's leader")
    q = info(cluster[leader_of(cluster, "s-basic")], "s-basic")
    assert sorted(q["members"]) == sorted(n.id for n in cluster.nodes) and q["epoch"] == 1
    conn = BlockingConnection(url(cluster[1]), timeout=10)
    sender = conn.create_sender("/queues/s-basic")
    for i in range(300):
        sender.send(Message(id=i, body=f"m{i}", durable=True))  # returns once accepted: a majority has it
    conn.close()
    cluster.wait_for(lambda: same_everywhere(cluster, "s-basic"), 20, "identical logs on the three nodes")
    logs = [chunks_on(node, "s-basic") for node in cluster.nodes]
    assert logs[0] == logs[1] == logs[2]  # the chunk bytes themselves
    assert ids_on(cluster[2], "s-basic") == list(range(300))


def test_x_initial_cluster_size_places_fewer_replicas(cluster):
    declare(cluster, 0, "s-two", **{"x-initial-cluster-size": 2})
    cluster.wait_for(lambda: leader_of(cluster, "s-two"), 10, "the stream's leader")
    assert len(info(cluster[leader_of(cluster, "s-two")], "s-two")["members"]) == 2


def read_until_stopped(node, name: str, stop: threading.Event, got: list, errors: list) -> None:
    """A consumer from `first` through `node`, accepting each message until `stop` and a quiet second."""
    conn = BlockingConnection(url(node), timeout=10)
    options = Filter({OFFSET_SPEC: Described(OFFSET_SPEC, "first")})
    receiver = conn.create_receiver(f"/queues/{name}", credit=100, options=options)
    try:
        while True:
            try:
                got.append(receiver.receive(timeout=1).id)
                receiver.accept()
            except Timeout:
                if stop.is_set():
                    break
    except Exception as e:  # a detached link: the test fails on it
        errors.append(e)
    conn.close()


def test_kill9_of_the_stream_leader_loses_no_confirmed_message_and_a_proxied_consumer_reads_on(cluster_factory):
    """Four nodes, three copies: the fourth node's consumer is served by the leader over the transport
    and, when the leader is killed, goes on at the new one from its next offset, each message once."""
    cluster = cluster_factory(4)
    cluster.start()
    declare(cluster, 0, "s-kill")
    leader = cluster.wait_for(lambda: leader_of(cluster, "s-kill"), 10, "the stream's leader")
    members = info(cluster[leader], "s-kill")["members"]
    copies = [n for n in cluster.nodes if n.id in members]
    outsider = next(n for n in cluster.nodes if n.id not in members)
    pub = next(n.index for n in copies if n.index != leader)
    confirmed: list[int] = []
    got: list[int] = []
    errors: list[Exception] = []
    stop, stop_reading = threading.Event(), threading.Event()
    threads = [threading.Thread(target=publish_until_stopped, args=(url(cluster[pub]), "/queues/s-kill", stop,
                                                                    confirmed), daemon=True),
               threading.Thread(target=read_until_stopped, args=(outsider, "s-kill", stop_reading, got, errors),
                                daemon=True)]  # fmt: skip
    for thread in threads:
        thread.start()
    cluster.wait_for(lambda: len(confirmed) >= 300 and len(got) >= 100, 30, "300 confirmed and 100 read first")
    cluster.kill9(leader)
    killed_at = len(confirmed)
    new_leader = cluster.wait_for(lambda: leader_of(cluster, "s-kill"), 30, "a new leader")
    assert new_leader != leader
    cluster.wait_for(lambda: len(confirmed) >= killed_at + 300, 60, "publishing resumed after the kill")
    cluster.restart(leader)
    stop.set()
    threads[0].join(30)
    assert info(cluster[new_leader], "s-kill")["epoch"] >= 2
    cluster.wait_for(lambda: same_everywhere(copies, "s-kill"), 30, "identical logs after the heal")
    stored = ids_on(cluster[leader], "s-kill")  # the old leader, its tail cut to the new one's
    lost = set(confirmed) - set(stored)
    print(f"\nconfirmed {len(confirmed)}, stored {len(stored)}, killed at {killed_at}, lost {len(lost)}")
    assert not lost
    offsets = [c[:2] for c in chunks_on(cluster[leader], "s-kill")]
    assert all(a[0] + a[1] == b[0] for a, b in zip(offsets, offsets[1:], strict=False))  # dense offsets
    cluster.wait_for(lambda: len(got) >= len(stored) or errors, 30, "the proxied consumer read the whole log")
    stop_reading.set()
    threads[1].join(30)
    assert not errors and got == stored  # through the kill: every message once, in the log's order


def test_a_partitioned_replica_catches_up(cluster):
    declare(cluster, 0, "s-cut")
    leader = cluster.wait_for(lambda: leader_of(cluster, "s-cut"), 10, "the stream's leader")
    cut = next(i for i in range(3) if i != leader)
    conn = BlockingConnection(url(cluster[leader]), timeout=10)
    sender = conn.create_sender("/queues/s-cut")
    sender.send(Message(id=0, body="before", durable=True))
    cluster.partition(cut)
    for i in range(1, 200):
        sender.send(Message(id=i, body=f"m{i}", durable=True))  # the other replica and the leader: a majority
    assert len(ids_on(cluster[cut], "s-cut")) < 200
    cluster.heal()
    cluster.wait_for(lambda: same_everywhere(cluster, "s-cut"), 30, "the cut replica caught up")
    assert ids_on(cluster[cut], "s-cut") == list(range(200))
    conn.close()


def test_consumers_on_a_follower_read_its_copy_and_a_node_without_one_is_served_over_the_transport(cluster):
    leader, follower, outsider = two_replica_stream(cluster, "s-read")
    far = BlockingConnection(url(cluster[outsider]), timeout=10)
    far_receiver = far.create_receiver("/queues/s-read", credit=50)  # offset spec next: what comes after
    conn = BlockingConnection(url(cluster[outsider]), timeout=10)  # published through a node without a copy
    sender = conn.create_sender("/queues/s-read")
    for i in range(100):
        sender.send(Message(id=i, body=f"m{i}", durable=True))
    conn.close()
    assert receive_ids(far_receiver, 100) == list(range(100))
    far.close()
    # the offset spec of a consumer on a node without a copy travels to the leader with its attach
    far = BlockingConnection(url(cluster[outsider]), timeout=10)
    at_50 = Filter({OFFSET_SPEC: Described(OFFSET_SPEC, ulong(50))})
    assert receive_ids(far.create_receiver("/queues/s-read", credit=20, options=at_50), 50) == list(range(50, 100))
    # and an SQL filter under a key of the client's own, known by its descriptor
    sql = Filter({OFFSET_SPEC: Described(OFFSET_SPEC, "first"),
                  symbol("odd"): Described(symbol("amqp:sql-filter"), "properties.message_id > 94")})  # fmt: skip
    sql_receiver = far.create_receiver("/queues/s-read", credit=20, options=sql, name="sql")
    assert receive_ids(sql_receiver, 5) == list(range(95, 100))
    far.close()
    # the follower's consumer reads from `first` on its own copy
    near = BlockingConnection(url(cluster[follower]), timeout=10)
    options = Filter({OFFSET_SPEC: Described(OFFSET_SPEC, "first")})
    receiver = near.create_receiver("/queues/s-read", credit=30, options=options)
    assert receive_ids(receiver, 100) == list(range(100))
    assert info(cluster[follower], "s-read")["message_stats"]["deliver"] == 100  # the follower served them
    near.close()
    assert ids_on(cluster[follower], "s-read") == list(range(100)) and ids_on(cluster[outsider], "s-read") == []


def test_replicas_are_added_and_removed_and_a_new_one_copies_the_log(cluster):
    declare(cluster, 0, "s-members", **{"x-initial-cluster-size": 1})
    leader = cluster.wait_for(lambda: leader_of(cluster, "s-members"), 10, "the stream's leader")
    conn = BlockingConnection(url(cluster[leader]), timeout=10)
    sender = conn.create_sender("/queues/s-members")
    for i in range(50):
        sender.send(Message(id=i, body=f"m{i}", durable=True))
    others = [n for n in cluster.nodes if n.index != leader]
    cluster[leader].http("POST", "/api/quorum-queues/%2F/s-members/members", {"node": others[0].id})
    cluster.wait_for(lambda: ids_on(others[0], "s-members") == list(range(50)), 20, "the new replica's copy")
    # grow: every member that lacks a replica gets one; the stream goes on in its new epoch
    rows = cluster[leader].http("POST", "/api/quorum-queues/grow", {"node": others[1].id})
    assert [r["ok"] for r in rows if r["name"] == "s-members"] == [True]
    q = info(cluster[leader], "s-members")
    assert len(q["members"]) == 3 and q["epoch"] == 3
    for i in range(50, 60):
        sender.send(Message(id=i, body=f"m{i}", durable=True))
    cluster.wait_for(lambda: same_everywhere(cluster, "s-members"), 20, "three identical copies")
    with pytest.raises(HttpError):  # the leader cannot be removed while it leads
        cluster[leader].http("DELETE", f"/api/quorum-queues/%2F/s-members/members/{cluster[leader].id}")
    cluster[leader].http("DELETE", f"/api/quorum-queues/%2F/s-members/members/{others[0].id}")
    cluster.wait_for(lambda: not stream_dir(others[0], "s-members").exists(), 10, "the removed replica's files gone")
    sender.send(Message(id=60, body="m60", durable=True))  # two replicas: still a majority
    conn.close()
    assert len(info(cluster[leader], "s-members")["members"]) == 2
