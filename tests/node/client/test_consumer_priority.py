"""The ATTACH property `rabbitmq:priority` (RabbitMQ's x-priority consumer
argument) as python-qpid-proton sends it: a higher-priority consumer of a
classic or quorum queue is served first while it has credit; a stream, whose
consumers each read everything, refuses it, and so does a value that is not
an integer (issue 31)."""

from __future__ import annotations

import pytest
from proton import Message, Timeout, symbol
from proton.reactor import LinkOption
from proton.utils import BlockingConnection, LinkDetached


class Priority(LinkOption):
    def __init__(self, value) -> None:
        self.value = value

    def apply(self, link) -> None:
        link.properties = {symbol("rabbitmq:priority"): self.value}


@pytest.mark.parametrize("queue_type", ["classic", "quorum"])
def test_the_higher_priority_consumer_is_served_first(broker, queue_type):
    broker.declare_queue("q", **{"x-queue-type": queue_type})
    conn = BlockingConnection(broker.url, timeout=10)
    low = conn.create_receiver("/queues/q", credit=10, name="low", options=Priority(1))
    high = conn.create_receiver("/queues/q", credit=10, name="high", options=Priority(5))
    sender = conn.create_sender("/queues/q")
    for i in range(3):
        sender.send(Message(body=f"m{i}"))
    assert [high.receive(timeout=10).body for _ in range(3)] == ["m0", "m1", "m2"]
    high.accept()
    with pytest.raises(Timeout):  # nothing went to the lower priority
        low.receive(timeout=0.3)
    conn.close()


def test_a_stream_refuses_a_consumer_priority(broker):
    broker.declare_queue("s", **{"x-queue-type": "stream"})
    conn = BlockingConnection(broker.url, timeout=10)
    with pytest.raises(LinkDetached, match="invalid-field.*rabbitmq:priority"):
        conn.create_receiver("/queues/s", options=Priority(5))
    conn.close()


def test_a_priority_that_is_not_an_integer_is_refused(broker):
    broker.declare_queue("q")
    conn = BlockingConnection(broker.url, timeout=10)
    with pytest.raises(LinkDetached, match="invalid-field.*expected integer"):
        conn.create_receiver("/queues/q", options=Priority("high"))
    conn.close()
