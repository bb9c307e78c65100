"""A stream leader that comes back without its log (its disk replaced, or the node wiped while
the metadata still names it) does not lead with an empty log: told by a replica's fetch that
more is committed than its log holds, it holds, has the replica with the log elected, and
copies from it (node/vhosts/stream_failover.py). Found by the chaos suite's forget-rejoin
fault: a two-replica stream's leader was forgotten (no majority was left to elect another),
wiped and started again, and its replica cut 196 messages, 186 confirmed, to the new empty
log. Three `warren server` processes."""

from __future__ import annotations

import shutil

import pytest
from proton import Delivery, Described, Message, symbol
from proton.reactor import Filter
from proton.utils import BlockingConnection
from received import receive_ids
from stream_logs import ids_on, leader_of, stream_dir, two_replica_stream, url

pytestmark = pytest.mark.slow
OFFSET_SPEC = symbol("rabbitmq:stream-offset-spec")
ACCEPTED = Delivery.ACCEPTED


def test_a_leader_back_without_its_log_hands_over_to_the_replica_with_it_and_nothing_confirmed_is_lost(cluster):
    leader, replica, outsider = two_replica_stream(cluster, "s-lost")
    conn = BlockingConnection(url(cluster[outsider]), timeout=10)
    sender = conn.create_sender("/queues/s-lost")
    for i in range(30):  # each confirmed, so on both replicas; released while the proxy finds the leader
        cluster.wait_for(lambda i=i: sender.send(Message(id=i, body=f"m{i}", durable=True), error_states=[])
                         .remote_state == ACCEPTED, 10, f"message {i} confirmed")  # fmt: skip
    conn.close()
    cluster.wait_for(lambda: ids_on(cluster[replica], "s-lost") == list(range(30)), 10, "the replica's copy")

    cluster.kill9(leader)  # one replica of two left: no majority to elect another
    shutil.rmtree(stream_dir(cluster[leader], "s-lost"))  # its log lost
    cluster.restart(leader)

    cluster.wait_for(lambda: leader_of(cluster, "s-lost") == replica, 30, "the replica with the log leading")
    assert ids_on(cluster[replica], "s-lost") == list(range(30))  # nothing cut
    cluster.wait_for(lambda: ids_on(cluster[leader], "s-lost") == list(range(30)), 20, "the copy made again")
    conn = BlockingConnection(url(cluster[outsider]), timeout=10)
    first = Filter({OFFSET_SPEC: Described(OFFSET_SPEC, "first")})
    assert receive_ids(conn.create_receiver("/queues/s-lost", credit=30, options=first), 30) == list(range(30))
    sender = conn.create_sender("/queues/s-lost")  # and it takes publishes again
    sender.send(Message(id=30, body="m30", durable=True))
    conn.close()
