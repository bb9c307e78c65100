"""A quorum queue's counts read right after a consumer holding unsettled messages detached
(issue 31): the messages are on their way back through the log, and no read may show them
gone. Three real nodes in this process; the followers are held so the Detach cannot commit
until the read is in, and the official client's /management read must wait for it."""

from __future__ import annotations

import threading

import pytest
from quorum_nodes import Publisher, quorum_queue, stall, start_nodes
from raw_client import RawClient
from rmq_client import connection

pytestmark = pytest.mark.timeout(120)

N = 50


def test_messages_a_detached_consumer_held_are_counted_while_they_go_back(broker_factory, tmp_path):
    nodes = start_nodes(broker_factory, tmp_path, 3)
    leader, follower, other, _ = quorum_queue(nodes, "qq-counts")
    Publisher(leader, "/queues/qq-counts").publish(N)
    client = RawClient(leader.port)
    client.connect()
    link = client.receiver(client.begin(), "/queues/qq-counts", credit=N)
    assert len(client.receive(N)) == N  # held, none settled
    with connection(leader.port) as conn:
        management = conn.management()
        assert management.queue_info("qq-counts").message_count == 0  # all checked out
        releases = [stall(follower), stall(other)]  # the leader can append the Detach, not commit it
        link.detach(closed=True)
        client.flush()
        later = threading.Timer(0.5, lambda: [go.set() for go in releases])
        later.start()
        try:
            assert management.queue_info("qq-counts").message_count == N
        finally:
            later.cancel()
            for go in releases:
                go.set()
    client.close()
