"""A consumer attached through one node to a classic queue on another, when
the queue's node has no stream back to the consumer's node at the moment the
attach arrives (three `warren server` processes).

This is what a restart of the consumer's node looks like from the queue's
node: the new incarnation's stream to it is up at once, while its own stream
to the restarted node waits out its reconnect backoff (and, in Docker, a new
address). Here the queue's node cuts only its own streams to the consumer's
node (the one-way test fault), so the window is as long as the test wants.
Every confirmed message must reach the consumer once the stream is back: the
queue's node must not check messages out to a link it cannot send to."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from cluster_procs import HttpError
from proton import Message
from proton.utils import BlockingConnection
from received import receive_ids

pytestmark = pytest.mark.slow

QUEUE = "reattach-q"


def url(node) -> str:
    return f"amqp://guest:guest@127.0.0.1:{node.amqp_port}"


def queue_info(node) -> dict | None:
    try:
        return node.http("GET", f"/api/queues/%2F/{quote(QUEUE, safe='')}")
    except HttpError as e:
        if e.status == 404:  # not declared on this node yet
            return None
        raise


def serving(node) -> bool:
    try:
        return queue_info(node) is not None
    except OSError:  # not listening yet
        return False


def test_a_consumer_attached_while_the_queue_node_cannot_answer_gets_every_message(cluster):
    client, owner = cluster[0], cluster[1]
    owner.http("PUT", f"/api/queues/%2F/{QUEUE}", {"durable": True})
    cluster.wait_for(lambda: queue_info(client) is not None, 10, "the queue on node 0")

    owner.http("POST", "/api/cluster/test/partition", {"peers": [client.id], "outbound_only": True})
    consumer = BlockingConnection(url(client), timeout=10)
    receiver = consumer.create_receiver(f"/queues/{QUEUE}", credit=20)
    publisher = BlockingConnection(url(owner), timeout=10)
    sender = publisher.create_sender(f"/queues/{QUEUE}")
    for i in range(30):  # returns once the queue confirmed it
        sender.send(Message(id=i, body=f"m{i}", durable=True))
    # nothing may be checked out to the consumer while its node cannot be sent to
    assert queue_info(owner)["messages_unacknowledged"] == 0
    owner.http("POST", "/api/cluster/test/heal", {})

    assert receive_ids(receiver, 30, timeout=10) == list(range(30))
    consumer.close()  # sends the last accepts before it detaches, which would return what is unsettled
    publisher.close()
    cluster.wait_for(lambda: queue_info(owner)["messages"] == 0, 10, "every message settled on the queue's node")


def test_a_consumer_reattached_through_a_restarted_node_gets_every_message(cluster):
    """The rolling-upgrade case: the consumer's node is killed and started
    again, its client attaches anew (the new incarnation's link ids start
    over), and the queue's node reaches it again only after the attach.
    Neither is the metadata leader (a restarted node starts once it hears from it)."""
    leader = cluster.leader()
    c, o = (i for i in range(3) if i != leader)
    client, owner = cluster[c], cluster[o]
    owner.http("PUT", f"/api/queues/%2F/{QUEUE}", {"durable": True})
    cluster.wait_for(lambda: queue_info(client) is not None, 10, "the queue on the consumer's node")
    before = BlockingConnection(url(client), timeout=10)
    before.create_receiver(f"/queues/{QUEUE}", credit=20)
    cluster.wait_for(lambda: queue_info(owner)["consumers"] == 1, 10, "the first consumer on the queue's node")

    cluster.kill9(c)
    owner.http("POST", "/api/cluster/test/partition", {"peers": [client.id], "outbound_only": True})
    cluster.spawn(c)
    cluster.wait_for(lambda: serving(client), 30, "the consumer's node back with the queue")
    consumer = BlockingConnection(url(client), timeout=10)
    receiver = consumer.create_receiver(f"/queues/{QUEUE}", credit=20)
    publisher = BlockingConnection(url(cluster[leader]), timeout=10)
    sender = publisher.create_sender(f"/queues/{QUEUE}")
    for i in range(30):
        sender.send(Message(id=i, body=f"m{i}", durable=True))
    owner.http("POST", "/api/cluster/test/heal", {})

    assert receive_ids(receiver, 30, timeout=10) == list(range(30))
    consumer.close()
    publisher.close()
    cluster.wait_for(lambda: queue_info(owner)["messages"] == 0, 10, "every message settled on the queue's node")
    assert queue_info(owner)["consumers"] == 0  # neither incarnation's consumer is left behind
