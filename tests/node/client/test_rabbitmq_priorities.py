"""Message priorities and single active consumer as RabbitMQ 4 has them
(issue 16, item 6), through RabbitMQ's own AMQP 1.0 client and
python-qpid-proton: classic queues with x-max-priority (paged and
restarted), x-single-active-consumer on classic queues with the consumers
listing, and the two-level priority of quorum queues."""

from __future__ import annotations

import pytest
from mgmt_client import Api
from proton import Message as ProtonMessage
from proton.utils import BlockingConnection
from rabbitmq_amqp_python_client import AddressHelper, ClassicQueueSpecification, Message, QuorumQueueSpecification
from rmq_client import connection, consume

pytestmark = pytest.mark.timeout(90)


def _publish(conn, queue: str, messages: list[tuple[str, int | None]]) -> None:
    publisher = conn.publisher(AddressHelper.queue_address(queue))
    for body, priority in messages:
        m = Message(body=body.encode(), durable=True)
        if priority is not None:
            m.priority = priority
        publisher.publish(m)
    publisher.close()


def test_classic_priority_queue_delivers_higher_first_paged_and_after_a_restart(broker_factory, tmp_path):
    data = tmp_path / "node"
    broker = broker_factory(data, classic_queue_memory_window=4)
    sent = [(f"m{i:02d}", None if i % 5 == 4 else i % 5 * 3) for i in range(40)]  # 0, 3, 6, 9, none
    with connection(broker.port) as conn:
        conn.management().declare_queue(ClassicQueueSpecification(name="jobs", max_priority=6))
        _publish(conn, "jobs", sent)
        assert conn.management().queue_info("jobs").message_count == 40
        # 9 is above the maximum: it counts as 6, in publish order with the 6s; none counts as 0
        level = {None: 0, 0: 0, 3: 3, 6: 6, 9: 6}
        expected = [b for p in (6, 3, 0) for b, prio in sent if level[prio] == p]
        first = consume(conn, AddressHelper.queue_address("jobs"), 10)
    assert [bytes(m.body).decode() for m in first] == expected[:10]
    info = broker.queue("jobs").info()
    assert info["messages_paged_out"] > 0  # behind the window of 4: on disk only

    broker.stop()
    broker = broker_factory(data, classic_queue_memory_window=4)
    with connection(broker.port) as conn:
        rest = consume(conn, AddressHelper.queue_address("jobs"), 30)
    assert [bytes(m.body).decode() for m in rest] == expected[10:]


def test_single_active_consumer_on_a_classic_queue(node):
    api = Api(node.broker.http_port)
    with connection(node.port) as conn:
        conn.management().declare_queue(ClassicQueueSpecification(name="sac", single_active_consumer=True))
    first_conn = BlockingConnection(node.url, timeout=10)
    second_conn = BlockingConnection(node.url, timeout=10)
    try:
        first = first_conn.create_receiver("/queues/sac", name="first", credit=10)
        second = second_conn.create_receiver("/queues/sac", name="second", credit=10)
        sender = first_conn.create_sender("/queues/sac")
        for i in range(3):
            sender.send(ProtonMessage(body=f"m{i}"))
        got = [first.receive(timeout=10) for _ in range(3)]  # all three to the active one
        assert [m.body for m in got] == ["m0", "m1", "m2"]
        first.accept()  # settles the oldest one received (m0): m1 and m2 stay unsettled
        consumers = {c["consumer_tag"]: c for c in api.get("/api/consumers").body}
        assert (consumers["first"]["active"], consumers["first"]["activity_status"]) == (True, "single_active")
        assert (consumers["second"]["active"], consumers["second"]["activity_status"]) == (False, "waiting")
        first_conn.close()  # what it left unsettled goes to the next consumer
        again = [second.receive(timeout=10) for _ in range(2)]
        assert [m.body for m in again] == ["m1", "m2"]
        assert [c["activity_status"] for c in api.get("/api/consumers").body] == ["single_active"]
    finally:
        second_conn.close()


def test_quorum_queue_serves_high_priority_two_for_one_normal(broker):
    # RabbitMQ 4: priority above 4 is high, anything else (or none) normal;
    # while both wait, two high messages go out for each normal one
    with connection(broker.port) as conn:
        conn.management().declare_queue(QuorumQueueSpecification(name="qq"))
        _publish(conn, "qq", [("n0", None), ("n1", 4), ("n2", 0), ("h0", 5), ("h1", 9), ("h2", 255), ("h3", 5)])
        got = consume(conn, AddressHelper.queue_address("qq"), 7)
    assert [bytes(m.body).decode() for m in got] == ["h0", "h1", "n0", "h2", "h3", "n1", "n2"]


def test_single_active_consumer_on_a_quorum_queue_in_the_consumers_listing(node):
    api = Api(node.broker.http_port)
    with connection(node.port) as conn:
        conn.management().declare_queue(QuorumQueueSpecification(name="qsac", single_active_consumer=True))
    first_conn = BlockingConnection(node.url, timeout=10)
    second_conn = BlockingConnection(node.url, timeout=10)
    try:
        first = first_conn.create_receiver("/queues/qsac", name="first", credit=10)
        second_conn.create_receiver("/queues/qsac", name="second", credit=10)
        sender = first_conn.create_sender("/queues/qsac")
        sender.send(ProtonMessage(body="m0"))
        assert first.receive(timeout=10).body == "m0"  # the attaches are applied: the first one is active
        first.accept()
        activity = {c["consumer_tag"]: (c["active"], c["activity_status"]) for c in api.get("/api/consumers").body}
        assert activity == {"first": (True, "single_active"), "second": (False, "waiting")}
    finally:
        first_conn.close()
        second_conn.close()
