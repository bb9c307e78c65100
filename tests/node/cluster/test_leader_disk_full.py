"""The leader of a three-replica quorum queue runs out of space in its Raft
log (ENOSPC injected through its test-fault hook, storage/faults.py), on three
real nodes in this process: it stays up, its disk alarm reaches every member
(publishers are held cluster-wide), a consumer on a follower still gets the
stored messages (the followers' disks commit them), and once the leader's
log writes again publishing resumes with every confirmed message there."""

from __future__ import annotations

import pytest
from proton import Message
from proton.utils import BlockingConnection
from quorum_nodes import quorum_queue, start_nodes, until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def url(node) -> str:
    return f"amqp://guest:guest@127.0.0.1:{node.port}"


def _publish(sender, n: int, start: int = 0) -> list:
    return [sender.send(Message(id=start + i, body=f"m{start + i}", durable=True), error_states=[]) for i in range(n)]


def test_a_quorum_leader_whose_disk_fills_loses_nothing_and_recovers_by_itself(broker_factory, tmp_path):
    nodes = start_nodes(broker_factory, tmp_path, 3, enable_test_faults=True, disk_free_limit=0,
                        alarm_check_interval=0.1)  # fmt: skip
    leader, consumer_node, publisher_node, _ = quorum_queue(nodes, "qq")
    pub = BlockingConnection(url(publisher_node), timeout=20)
    sender = pub.create_sender("/queues/qq")
    assert all(d.remote_state == d.ACCEPTED for d in _publish(sender, 30))

    leader.broker.disk_faults.arm("raft", "write", "ENOSPC", None)
    # sent before any alarm: the leader appends it (in memory only), the followers store it
    in_fault = sender.link.send(Message(id=100, body="m100", durable=True))
    pub.wait(lambda: leader.broker.cluster.out_of_space, timeout=20, msg="the leader's log write did not fail")
    for n in nodes:  # cluster-wide: the leader's alarm reaches the others by its (ungated) gossip
        until(lambda n=n: n.call(lambda: n.broker.alarms.active), "the disk alarm everywhere")
    pub.wait(lambda: sender.link.credit <= 0, timeout=20, msg="the publisher was not held")
    assert leader.broker.cluster.failed is None

    # a consumer on a follower reads what is stored: settlements and credit commit on the followers' disks
    con = BlockingConnection(url(consumer_node), timeout=20)
    receiver = con.create_receiver("/queues/qq", credit=10)
    got = []
    for _ in range(30):
        got.append(receiver.receive(timeout=20).id)
        receiver.accept()
    assert got == list(range(30))
    assert leader.broker.cluster.out_of_space  # all of it while the leader could not write

    leader.broker.disk_faults.clear()
    until(lambda: not leader.broker.cluster.out_of_space, "the leader's log writes again")
    for n in nodes:
        until(lambda n=n: not n.call(lambda: n.broker.alarms.active), "the alarm cleared everywhere")
    pub.wait(lambda: in_fault.settled, timeout=20, msg="the publish sent into the fault was not settled")
    assert in_fault.remote_state == in_fault.ACCEPTED
    pub.wait(lambda: sender.link.credit > 0, timeout=20, msg="publishing did not resume")
    assert all(d.remote_state == d.ACCEPTED for d in _publish(sender, 10, start=200))
    pub.close()
    rest = []
    for _ in range(11):
        rest.append(receiver.receive(timeout=20).id)
        receiver.accept()
    con.close()
    assert rest == [100, *range(200, 210)]
    assert leader.broker.cluster.failed is None
