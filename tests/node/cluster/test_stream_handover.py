"""Draining a stream's leader on three `warren server` processes: the
leadership moves to an in-sync replica while a publisher on another node
publishes throughout, nothing confirmed is lost, and consumers reading the
old leader's copy and the new one's go on from their next offset."""

from __future__ import annotations

import json
import threading

import pytest
from confirmed_sends import publish_until_stopped
from proton import Described, Message, Timeout, symbol
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


def test_drain_hands_a_stream_leadership_to_an_in_sync_replica_and_loses_nothing_confirmed(cluster):
    policy(cluster, {"stream-max-segment-size-bytes": 4_000})  # every copy cuts its segments there
    declare(cluster, 0, "s-drain")
    old = cluster.wait_for(lambda: leader_of(cluster, "s-drain"), 10, "the stream's leader")
    pub = next(i for i in range(3) if i != old)
    confirmed: list[int] = []
    stop = threading.Event()
    thread = threading.Thread(target=publish_until_stopped, daemon=True,
                              args=(url(cluster[pub]), "/queues/s-drain", stop, confirmed))  # fmt: skip
    thread.start()
    cluster.wait_for(lambda: len(confirmed) >= 200, 30, "200 confirmed before the drain")
    result = cluster.ctl(old, "--json", "drain")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    drained_at = len(confirmed)
    moved = {s["name"]: s["new_leader"] for s in report["streams_moved"]}
    assert report["done"] is True and report["streams_still_leading"] == []
    assert moved["s-drain"] in {n.id for n in cluster.nodes} - {cluster[old].id}
    cluster.wait_for(lambda: len(confirmed) >= drained_at + 200, 30, "publishing went on through the new leader")
    stop.set()
    thread.join(30)
    new = leader_of(cluster, "s-drain")
    assert cluster[new].id == moved["s-drain"]
    assert info(cluster[new], "s-drain")["epoch"] == 2
    cluster.wait_for(lambda: same_everywhere(cluster, "s-drain"), 30, "identical logs")
    stored = ids_on(cluster[old], "s-drain")  # the drained node follows the new leader
    assert not set(confirmed) - set(stored)
    assert stored == sorted(set(stored))  # in the order sent, each once
    offsets = [c[:2] for c in chunks_on(cluster[new], "s-drain")]
    assert all(a[0] + a[1] == b[0] for a, b in zip(offsets, offsets[1:], strict=False))  # dense offsets
    # the policy holds on the copies reopened in their new roles, and a new one reaches every copy
    before = segments(cluster[new])
    assert len(before) > 3 and segments(cluster[0]) == segments(cluster[1]) == segments(cluster[2])
    policy(cluster, {"stream-max-segment-size-bytes": 4_000, "max-length-bytes": 12_000})
    conn = BlockingConnection(url(cluster[pub]), timeout=10)
    conn.create_sender("/queues/s-drain").send(Message(id=10**6, body="after", durable=True))  # retention runs
    conn.close()

    def retained_alike() -> bool:
        now = [segments(node) for node in cluster.nodes]
        return before[0] not in now[0] and now[0] == now[1] == now[2]

    cluster.wait_for(retained_alike, 20, "every copy removed the same segments")


def policy(cluster, definition: dict) -> None:
    cluster[0].http("PUT", "/api/policies/%2F/s-drain", {"pattern": "^s-drain$", "apply-to": "streams",
                                                         "definition": definition})  # fmt: skip


def segments(node) -> list[str]:
    return sorted(p.name for p in stream_dir(node, "s-drain").glob("*.segment"))


def test_consumers_of_the_drained_leader_and_of_the_new_one_read_every_offset_once(cluster):
    old, replica, outsider = two_replica_stream(cluster, "s-follow")
    first = Filter({OFFSET_SPEC: Described(OFFSET_SPEC, "first")})
    # on the replica's node: reads its copy, which becomes the leader's
    near = BlockingConnection(url(cluster[replica]), timeout=10)
    near_receiver = near.create_receiver("/queues/s-follow", credit=20, options=first)
    # on a node without a copy: served by the leader's node, whose copy becomes a replica's
    far = BlockingConnection(url(cluster[outsider]), timeout=10)
    far_receiver = far.create_receiver("/queues/s-follow", credit=20, options=first)
    conn = BlockingConnection(url(cluster[outsider]), timeout=10)
    sender = conn.create_sender("/queues/s-follow")
    for i in range(200):
        sender.send(Message(id=i, body=f"m{i}", durable=True))
    assert receive_ids(near_receiver, 100) == list(range(100))
    assert receive_ids(far_receiver, 100) == list(range(100))
    result = cluster.ctl(old, "--json", "drain")
    assert result.returncode == 0, result.stderr
    assert [s["new_leader"] for s in json.loads(result.stdout)["streams_moved"]] == [cluster[replica].id]
    for i in range(200, 400):
        sender.send(Message(id=i, body=f"m{i}", durable=True))
    assert receive_ids(near_receiver, 300) == list(range(100, 400))
    assert receive_ids(far_receiver, 300) == list(range(100, 400))
    with pytest.raises(Timeout):  # and nothing twice
        near_receiver.receive(timeout=0.5)
    assert leader_of(cluster, "s-follow") == replica
    for c in (near, far, conn):
        c.close()
