"""The official client's own examples (rabbitmq-amqp-python-client 1.0,
examples/ in its repository), used as documented against a fresh node with
no extra command: the same calls in the same order, with the broker's
address and port put in, a bounded consumer instead of "run until Ctrl+C",
and assertions where the examples print. Issue 16, "done when"."""

from __future__ import annotations

import asyncio

import pytest
from rabbitmq_amqp_python_client import (
    AddressHelper,
    AmqpMessageRejectedException,
    AMQPMessagingHandler,
    AmqpUri,
    AsyncEnvironment,
    ConsumerOptions,
    ConsumerSettleStrategy,
    Converter,
    Environment,
    Event,
    ExchangeSpecification,
    ExchangeToQueueBindingSpecification,
    Message,
    OffsetSpecification,
    OutcomeState,
    PosixClientCert,
    PosixSslConfigurationContext,
    QuorumConsumerOptions,
    QuorumQueueSpecification,
    StreamConsumerOptions,
    StreamFilterOptions,
    StreamSpecification,
)

pytestmark = pytest.mark.timeout(90)


class Stop(Exception):
    """Leaves consumer.run() once the example's message count is reached (the examples wait for Ctrl+C)."""


class CountingHandler(AMQPMessagingHandler):
    """The examples' handler: accept each message, count, stop at `n`."""

    def __init__(self, n: int, accept: bool = True):
        super().__init__()
        self.n = n
        self.accept = accept  # False for pre-settled deliveries: the client refuses to settle them again
        self.bodies: list[bytes] = []
        self.correlation_ids: list = []

    def on_amqp_message(self, event: Event) -> None:
        self.bodies.append(bytes(event.message.body))
        self.correlation_ids.append(event.message.correlation_id)
        if self.accept:
            self.delivery_context.accept(event)
        if len(self.bodies) == self.n:
            raise Stop()


def run_until_stopped(consumer) -> None:
    with pytest.raises(Stop):
        consumer.run()


def getting_started(environment: Environment, connection) -> None:
    """examples/getting_started/getting_started.py (and tls/tls_example.py)
    after the connection: exchange, quorum queue, binding, publish 100 to the
    exchange address, consume them, unbind and delete."""
    exchange_name, queue_name, routing_key, n = "test-exchange", "example-queue", "routing-key", 100
    management = connection.management()
    management.declare_exchange(ExchangeSpecification(name=exchange_name))
    management.declare_queue(QuorumQueueSpecification(name=queue_name))
    bind_name = management.bind(ExchangeToQueueBindingSpecification(
        source_exchange=exchange_name, destination_queue=queue_name, binding_key=routing_key))  # fmt: skip
    publisher = connection.publisher(AddressHelper.exchange_address(exchange_name, routing_key))
    assert management.purge_queue(queue_name) == 0
    for _ in range(n):
        status = publisher.publish(Message(body=Converter.string_to_bytes("test")))
        assert status.remote_state == OutcomeState.ACCEPTED
    publisher.close()
    handler = CountingHandler(n)
    consumer = connection.consumer(AddressHelper.queue_address(queue_name), message_handler=handler)
    run_until_stopped(consumer)
    consumer.close()
    assert handler.bodies == [b"test"] * n
    management.unbind(bind_name)
    management.delete_queue(queue_name)
    management.delete_exchange(exchange_name)
    management.close()
    environment.close()


def test_getting_started(broker):
    environment = Environment(uri=f"amqp://guest:guest@localhost:{broker.port}/")
    connection = environment.connection()
    connection.dial()
    getting_started(environment, connection)
    assert "example-queue" not in broker.vhost.queues


def test_getting_started_over_tls(broker_factory, certs):
    """examples/tls/tls_example.py with the client's 1.0 API (the TLS settings go to the Environment)."""
    broker = broker_factory(**certs.server_settings("peer"))
    environment = Environment(
        f"amqps://guest:guest@localhost:{broker.broker.amqps_port}/",
        ssl_context=PosixSslConfigurationContext(
            ca_cert=certs.ca, client_cert=PosixClientCert(client_cert=certs.path("client.pem"),
                                                          client_key=certs.path("client.key"))),
    )  # fmt: skip
    connection = environment.connection()
    connection.dial()
    getting_started(environment, connection)


def test_getting_started_async(broker):
    """examples/getting_started/getting_started_async.py."""
    n = 100

    async def main() -> list[bytes]:
        async with AsyncEnvironment(uri=f"amqp://guest:guest@localhost:{broker.port}/") as environment:
            async with await environment.connection() as connection:
                async with await connection.management() as management:
                    await management.declare_exchange(ExchangeSpecification(name="test-exchange"))
                    await management.declare_queue(QuorumQueueSpecification(name="example-queue"))
                    bind_name = await management.bind(ExchangeToQueueBindingSpecification(
                        source_exchange="test-exchange", destination_queue="example-queue",
                        binding_key="routing-key"))  # fmt: skip
                    address = AddressHelper.exchange_address("test-exchange", "routing-key")
                    async with await connection.publisher(address) as publisher:
                        assert await management.purge_queue("example-queue") == 0
                        for i in range(n):
                            status = await publisher.publish(Message(body=Converter.string_to_bytes(f"test message {i}")))
                            assert status.remote_state == OutcomeState.ACCEPTED
                    handler = CountingHandler(n)
                    queue = AddressHelper.queue_address("example-queue")
                    async with await connection.consumer(queue, message_handler=handler) as consumer:
                        with pytest.raises(Stop):
                            await asyncio.create_task(consumer.run())
                    await management.unbind(bind_name)
                    await management.delete_queue("example-queue")
                    await management.delete_exchange("test-exchange")
                    return handler.bodies

    assert asyncio.run(main()) == [f"test message {i}".encode() for i in range(n)]


def test_amqp_uri(broker):
    """examples/amqp_uri/example_amqp_uri.py: the connection from AmqpUri fields."""
    environment = Environment(amqp_uri=AmqpUri(host="localhost", port=broker.port, user="guest", password="guest",
                                               vhost="/"))  # fmt: skip
    connection = environment.connection()
    connection.dial()
    management = connection.management()
    management.declare_queue(QuorumQueueSpecification(name="amqp-uri-example-queue"))
    address = AddressHelper.queue_address("amqp-uri-example-queue")
    publisher = connection.publisher(address)
    for i in range(10):
        assert publisher.publish(Message(body=Converter.string_to_bytes(f"message {i}"))).remote_state == \
            OutcomeState.ACCEPTED  # fmt: skip
    publisher.close()
    handler = CountingHandler(10)
    consumer = connection.consumer(address, message_handler=handler)
    run_until_stopped(consumer)
    consumer.close()
    assert handler.bodies == [f"message {i}".encode() for i in range(10)]
    management = connection.management()
    management.delete_queue("amqp-uri-example-queue")
    management.close()
    environment.close()


def test_pre_settled_consumer(broker):
    """examples/pre_settled_consumer: at-most-once deliveries on a quorum queue
    (the handler does not accept: the client raises on settling a delivery
    that came settled, as against RabbitMQ)."""
    environment = Environment(uri=f"amqp://guest:guest@localhost:{broker.port}/")
    connection = environment.connection()
    connection.dial()
    management = connection.management()
    management.declare_queue(QuorumQueueSpecification(name="example-fifo-queue"))
    address = AddressHelper.queue_address("example-fifo-queue")
    publisher = connection.publisher(address)
    assert management.purge_queue("example-fifo-queue") == 0
    for i in range(50):
        publisher.publish(Message(body=Converter.string_to_bytes(f"test message {i}")))
    publisher.close()
    handler = CountingHandler(50, accept=False)
    consumer = connection.consumer(address, message_handler=handler,
                                   consumer_options=ConsumerOptions(settle_strategy=ConsumerSettleStrategy.PreSettled))  # fmt: skip
    run_until_stopped(consumer)
    consumer.close()
    assert handler.bodies == [f"test message {i}".encode() for i in range(50)]
    management = connection.management()
    info = management.queue_info("example-fifo-queue")
    assert info.message_count == 0  # pre-settled: gone once sent, nothing waits for a settlement
    management.delete_queue("example-fifo-queue")
    management.close()
    environment.close()


def test_rejected_messages(broker):
    """examples/rejected_messages: a full queue with reject-publish rejects the
    publish, and the client raises with the broker's description."""
    environment = Environment(uri=f"amqp://guest:guest@localhost:{broker.port}/")
    connection = environment.connection()
    connection.dial()
    management = connection.management()
    management.declare_queue(QuorumQueueSpecification(name="example-rejected-messages", max_len=5,
                                                      overflow_behaviour="reject-publish"))  # fmt: skip
    publisher = connection.publisher(AddressHelper.queue_address("example-rejected-messages"))
    for i in range(5):
        status = publisher.publish(Message(body=Converter.string_to_bytes(f"message-{i}")))
        assert status.remote_state == OutcomeState.ACCEPTED
    for _ in range(5):
        with pytest.raises(AmqpMessageRejectedException):
            publisher.publish(Message(body=Converter.string_to_bytes("overflow-message")))
    publisher.close()
    assert management.purge_queue("example-rejected-messages") == 5
    management.delete_queue("example-rejected-messages")
    management.close()
    environment.close()


class Responder(AMQPMessagingHandler):
    """examples/rpc/server.py's handler: answer each request on its reply-to
    address, with its correlation id, through an anonymous publisher."""

    def __init__(self, publisher, n: int):
        super().__init__()
        self.publisher, self.n, self.served = publisher, n, 0

    def on_amqp_message(self, event: Event) -> None:
        response = Message(body=Converter.string_to_bytes(
            Converter.bytes_to_string(event.message.body) + "-from the server"))  # fmt: skip
        response.correlation_id = event.message.correlation_id
        response.address = event.message.reply_to
        assert self.publisher.publish(message=response).remote_state == OutcomeState.ACCEPTED
        self.delivery_context.accept(event)
        self.served += 1
        if self.served == self.n:
            raise Stop()


def test_rpc_server_with_a_reply_queue(broker):
    """examples/rpc/server.py as it is (it deletes its request queue first,
    missing or not, and answers through a publisher without an address); the
    requester waits on a queue of its own instead of direct reply-to (below)."""
    n = 10
    environment = Environment(uri=f"amqp://guest:guest@localhost:{broker.port}/")
    server = environment.connection()
    server.dial()
    server.management().delete_queue("rpc_queue")  # not there yet: RabbitMQ answers 200, 0 messages
    server.management().declare_queue(queue_specification=QuorumQueueSpecification("rpc_queue"))
    client = environment.connection()
    client.dial()
    client.management().declare_queue(QuorumQueueSpecification(name="rpc-replies"))
    requests = client.publisher(AddressHelper.queue_address("rpc_queue"))
    for i in range(n):
        message = Message(body=Converter.string_to_bytes(f"hello {i}"))
        message.reply_to = AddressHelper.queue_address("rpc-replies")
        message.correlation_id = str(i)
        requests.publish(message=message)
    responder = Responder(server.publisher(), n)
    run_until_stopped(server.consumer(destination=AddressHelper.queue_address("rpc_queue"), message_handler=responder))
    replies = CountingHandler(n)
    run_until_stopped(client.consumer(AddressHelper.queue_address("rpc-replies"), message_handler=replies))
    assert replies.bodies == [f"hello {i}-from the server".encode() for i in range(n)]
    assert replies.correlation_ids == [str(i) for i in range(n)]
    environment.close()


def test_rpc_with_direct_reply_to(broker):
    """examples/rpc/client.py: the requester's reply consumer uses direct
    reply-to (the whole round trip: test_direct_reply_to_rmq_client.py)."""
    environment = Environment(uri=f"amqp://guest:guest@localhost:{broker.port}/")
    connection = environment.connection()
    connection.dial()
    try:
        consumer = connection.consumer(
            consumer_options=ConsumerOptions(settle_strategy=ConsumerSettleStrategy.DirectReplyTo),
            message_handler=CountingHandler(1),
        )
        assert consumer.address.startswith("/queues/amq.rabbitmq.reply-to.")
    finally:
        environment.close()


def test_quorum_queue_sac_state_notifications_need_rabbitmq_4_3(broker):
    """examples/quorum_queue_sac: the state handler needs RabbitMQ 4.3 (FLOW
    link-state `rabbitmq:active`); the node reports 4.2.0, so the client
    refuses the option before attaching. The queue and its single active
    consumer work without the handler."""
    from rabbitmq_amqp_python_client import ValidationCodeException

    environment = Environment(uri=f"amqp://guest:guest@localhost:{broker.port}/")
    connection = environment.connection()
    connection.dial()
    management = connection.management()
    management.declare_queue(QuorumQueueSpecification(name="example-sac-quorum-queue", single_active_consumer=True))
    address = AddressHelper.queue_address("example-sac-quorum-queue")
    with pytest.raises(ValidationCodeException, match="4.3.0"):
        connection.consumer(address, message_handler=CountingHandler(1),
                            consumer_options=QuorumConsumerOptions(sac_state_handler=lambda active: None))  # fmt: skip
    publisher = connection.publisher(address)
    for i in range(20):
        publisher.publish(Message(body=Converter.string_to_bytes(f"message {i + 1}")))
    publisher.close()
    handler = CountingHandler(20)
    consumer = connection.consumer(address, message_handler=handler, consumer_options=QuorumConsumerOptions())
    run_until_stopped(consumer)
    consumer.close()
    assert len(handler.bodies) == 20
    management.delete_queue("example-sac-quorum-queue")
    management.close()
    environment.close()


def test_streams(broker):
    """examples/streams/example_with_streams.py: declare a stream, publish, read from the first offset."""
    environment = Environment(uri=f"amqp://guest:guest@localhost:{broker.port}/")
    connection = environment.connection()
    connection.dial()
    try:
        management = connection.management()
        management.declare_queue(StreamSpecification(name="example-queue"))
        address = AddressHelper.queue_address("example-queue")
        publisher = connection.publisher(address)
        for i in range(10):
            publisher.publish(Message(body=Converter.string_to_bytes(f"test message {i}")))
        publisher.close()
        handler = CountingHandler(10)
        consumer = connection.consumer(address, message_handler=handler,
                                       consumer_options=StreamConsumerOptions(offset_specification=OffsetSpecification.first))  # fmt: skip
        run_until_stopped(consumer)
    finally:
        environment.close()


def test_stream_filters_with_the_official_client(broker):
    """examples/streams_with_filters: filter values with and without match-unfiltered, and an
    application-properties filter, each served by the broker (the consumer gets only matching messages)."""
    environment = Environment(uri=f"amqp://guest:guest@localhost:{broker.port}/")
    connection = environment.connection()
    connection.dial()
    try:
        connection.management().declare_queue(StreamSpecification(name="filtered"))
        address = AddressHelper.queue_address("filtered")
        publisher = connection.publisher(address)
        for i, value in enumerate(["red", "blue", None, "red"]):
            annotations = {"x-stream-filter-value": value} if value else None
            publisher.publish(Message(body=Converter.string_to_bytes(f"m{i}"), annotations=annotations,
                                      application_properties={"n": i % 2}))  # fmt: skip
        publisher.close()
        for options, expected in [
            (StreamFilterOptions(values=["red"]), [b"m0", b"m3"]),
            (StreamFilterOptions(values=["blue"], match_unfiltered=True), [b"m1", b"m2"]),
            (StreamFilterOptions(application_properties={"n": 1}), [b"m1", b"m3"]),
        ]:
            handler = CountingHandler(len(expected))
            consumer = connection.consumer(address, message_handler=handler, consumer_options=StreamConsumerOptions(
                offset_specification=OffsetSpecification.first, filter_options=options))  # fmt: skip
            run_until_stopped(consumer)
            consumer.close()
            assert handler.bodies == expected
    finally:
        environment.close()
