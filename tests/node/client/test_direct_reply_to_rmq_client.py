"""Direct Reply-To with RabbitMQ's own AMQP 1.0 client
(rabbitmq-amqp-python-client): its requester consumer
(ConsumerSettleStrategy.DirectReplyTo, which the client allows from server
version 4.2.0) and its responder pattern (an anonymous publisher sending to
the request's reply-to), as in the client's RPC example."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from rabbitmq_amqp_python_client import (
    AddressHelper,
    AMQPMessagingHandler,
    ClassicQueueSpecification,
    ConsumerOptions,
    ConsumerSettleStrategy,
    Event,
    Message,
    OutcomeState,
)
from rmq_client import Enough, connection, consume
from rmq_client import request as management_request

pytestmark = pytest.mark.timeout(60)


class Replies(AMQPMessagingHandler):
    """Keeps n replies, which come settled: nothing to accept."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.messages: list = []

    def on_amqp_message(self, event: Event) -> None:
        assert event.delivery.settled
        self.messages.append(event.message)
        if len(self.messages) >= self.n:
            raise Enough()


def test_rpc_with_the_official_client(broker):
    with connection(broker.port) as requester_conn, connection(broker.port) as responder_conn:
        responder_conn.management().declare_queue(ClassicQueueSpecification(name="rpc_queue"))
        replies = Replies(3)
        reply_consumer = requester_conn.consumer(
            consumer_options=ConsumerOptions(settle_strategy=ConsumerSettleStrategy.DirectReplyTo),
            message_handler=replies,
            credit=10,
        )
        reply_to = reply_consumer.address
        assert reply_to.startswith("/queues/amq.rabbitmq.reply-to.")

        requests = requester_conn.publisher(AddressHelper.queue_address("rpc_queue"))
        for i in range(3):
            request = Message(body=f"hello {i}".encode())
            request.reply_to = reply_to
            request.correlation_id = str(i)
            assert requests.publish(request).remote_state == OutcomeState.ACCEPTED

        relay = responder_conn.publisher()  # the anonymous terminus
        for request in consume(responder_conn, AddressHelper.queue_address("rpc_queue"), 3):
            reply = Message(body=bytes(request.body) + b" - from the responder")
            reply.correlation_id = request.correlation_id
            reply.address = request.reply_to
            assert relay.publish(reply).remote_state == OutcomeState.ACCEPTED

        try:
            reply_consumer.run()
        except Enough:
            pass
        got = {m.correlation_id: bytes(m.body) for m in replies.messages}
        assert got == {str(i): f"hello {i} - from the responder".encode() for i in range(3)}
        # a responder may ask whether the requester is still there (HTTP GET over AMQP)
        management = responder_conn.management()
        path = "/queues/" + quote(reply_to[len("/queues/") :], safe="")
        status, info = management_request(management, "GET", path)
        assert status == 200 and info["type"] == "rabbit_volatile_queue" and info["consumer_count"] == 1
        reply_consumer.close()
        assert management_request(management, "GET", path)[0] == 404
        # the requester is gone: a reply is still accepted (and dropped), as RabbitMQ does
        late = Message(body=b"late")
        late.address = reply_to
        assert relay.publish(late).remote_state == OutcomeState.ACCEPTED
