"""SQL filter expressions (amqp:sql-filter) on a stream, end to end: proton
sends the filter as a raw filter-set entry (by descriptor symbol and code),
the official client through StreamFilterOptions(sql=...). The consumer gets
exactly the matching messages, the reply ATTACH echoes the filter, and an
expression the broker cannot apply refuses the link with amqp:invalid-field."""

from __future__ import annotations

import pytest
from proton import Described, Message, symbol, ulong
from proton.reactor import Filter
from proton.utils import BlockingConnection, LinkDetached
from rabbitmq_amqp_python_client import (
    AddressHelper,
    AMQPMessagingHandler,
    Converter,
    Environment,
    Event,
    OffsetSpecification,
    StreamConsumerOptions,
    StreamFilterOptions,
    StreamSpecification,
)
from rabbitmq_amqp_python_client import Message as ClientMessage

pytestmark = pytest.mark.timeout(90)

OFFSET_SPEC = symbol("rabbitmq:stream-offset-spec")
STREAM_FILTER = symbol("rabbitmq:stream-filter")
SQL = symbol("amqp:sql-filter")
SQL_KEY = symbol("sql-filter")  # the key RabbitMQ's clients use; the descriptor says what the filter is
ORDERS = [  # subject, priority, application properties, x-stream-filter-value
    ("order.created", 4, {"region": "emea", "amount": 120, "premium": False}, "order.created"),
    ("order.created", 9, {"region": "amer", "amount": 15.5, "premium": True}, "order.created"),
    ("order.paid", 4, {"region": "emea", "amount": 99, "note": "It's paid"}, "order.paid"),
    ("invoice", 1, {"region": "apj", "amount": 5000, "code": "_A1"}, None),
    (None, 4, {"region": "EU-west", "code": "XA1"}, None),
]


def publish_orders(conn, stream: str) -> None:
    sender = conn.create_sender(f"/queues/{stream}")
    for i, (subject, priority, app, filter_value) in enumerate(ORDERS):
        annotations = {symbol("x-stream-filter-value"): filter_value} if filter_value else None
        sender.send(Message(body=f"m{i}", subject=subject, priority=priority, properties=app, durable=True,
                            annotations=annotations))  # fmt: skip
    sender.close()


def echoed_filters(receiver) -> dict:
    data = receiver.link.remote_source.filter
    data.rewind()
    return data.get_object() if data.next() is not None else {}


@pytest.fixture
def orders(broker):
    broker.declare_queue("orders", **{"x-queue-type": "stream"})
    conn = BlockingConnection(broker.url, timeout=10)
    publish_orders(conn, "orders")
    yield conn
    conn.close()


def read_all(conn, filters: dict) -> list[str]:
    """Every message the filter lets through, from the first offset: credit for more than could match,
    drained, so the broker's drain reply says there is nothing more. The reply ATTACH echoes each filter."""
    options = Filter({OFFSET_SPEC: Described(OFFSET_SPEC, "first"), **filters})
    receiver = conn.create_receiver("/queues/orders", options=options)  # no credit yet
    assert set(echoed_filters(receiver)) == {OFFSET_SPEC, *filters}
    receiver.link.drain(len(ORDERS) + 1)
    conn.wait(lambda: receiver.link.credit == 0, timeout=10)  # one credit is always left over for the drain
    got = []
    while receiver.fetcher.has_message:
        got.append(receiver.fetcher.pop().body)
    receiver.close()
    return got


def sql(expression: str, descriptor=SQL) -> dict:
    return {SQL_KEY: Described(descriptor, expression)}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("p.subject = 'order.created'", ["m0", "m1"]),
        ("properties.subject LIKE 'order.%' AND region = 'emea'", ["m0", "m2"]),
        ("h.priority > 4 OR amount >= 1000", ["m1", "m3"]),
        ("header.priority = 4", ["m0", "m2", "m4"]),  # m4 with the default priority
        ("region IN ('amer', 'apj')", ["m1", "m3"]),
        ("region NOT IN ('amer', 'apj')", ["m0", "m2", "m4"]),
        ("amount > 99.5", ["m0", "m3"]),  # ints and floats compare as numbers
        ("amount = 120.0", ["m0"]),
        ("amount / 2 >= 60 AND amount % 2 = 0", ["m0", "m3"]),
        ("premium", ["m1"]),
        ("NOT premium", ["m0"]),  # NOT unknown is unknown: messages without premium do not match
        ("premium IS NULL", ["m2", "m3", "m4"]),
        ("missing IS NULL", ["m0", "m1", "m2", "m3", "m4"]),
        ("missing = 1 OR missing <> 1", []),  # unknown either way
        ("p.subject IS NULL", ["m4"]),
        ("note = 'It''s paid'", ["m2"]),
        ("code LIKE '\\_%' ESCAPE '\\'", ["m3"]),
        ("code LIKE '_A1'", ["m3", "m4"]),
        ("region LIKE 'EU-%' OR region = 'apj'", ["m3", "m4"]),
        ("p.creation_time IS NULL AND (p.absolute_expiry_time IS NULL OR p.absolute_expiry_time > UTC())",
         ["m0", "m1", "m2", "m3", "m4"]),
        ("FALSE", []),
    ],
)  # fmt: skip
def test_only_matching_messages_are_delivered(orders, expression, expected):
    assert read_all(orders, sql(expression)) == expected


def test_the_descriptor_code_and_a_bloom_filter_together(orders):
    assert read_all(orders, sql("h.priority > 4", descriptor=ulong(0x120))) == ["m1"]
    # the Bloom filter picks chunks and filter values, the SQL filter then picks messages
    both = {STREAM_FILTER: Described(STREAM_FILTER, "order.created"), **sql("region = 'emea'")}
    assert read_all(orders, both) == ["m0"]


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("FALSE FALSE", "expected an operator or the end at 6"),
        ("@#$%^&", "unexpected character"),
        ("LOWER(region) = 'emea'", "unknown function LOWER()"),
        ("p.colour = 'red'", "no such field"),
        ("region = 'open", "unterminated string"),
        ("a = 1 AND " * 500 + "a = 1", "more than the 4096 allowed"),
    ],
)
def test_an_invalid_expression_refuses_the_link(orders, expression, error):
    options = Filter({OFFSET_SPEC: Described(OFFSET_SPEC, "first"), **sql(expression)})
    with pytest.raises(LinkDetached, match="invalid-field") as refused:
        orders.create_receiver("/queues/orders", options=options)
    assert error in str(refused.value)
    # and nothing was echoed: the refusal's ATTACH has no source at all
    assert read_all(orders, sql("region = 'apj'")) == ["m3"]  # the connection goes on


def test_an_unknown_descriptor_is_not_applied_and_not_echoed(orders):
    options = Filter({OFFSET_SPEC: Described(OFFSET_SPEC, "first"),
                      SQL_KEY: Described(symbol("apache.org:invalid:string"), "TRUE")})  # fmt: skip
    receiver = orders.create_receiver("/queues/orders", credit=10, options=options)
    assert set(echoed_filters(receiver)) == {OFFSET_SPEC}
    assert [receiver.receive(timeout=10).body for _ in ORDERS] == [f"m{i}" for i in range(len(ORDERS))]
    receiver.close()


def test_property_filters_and_an_sql_filter_both_apply(orders):
    props = symbol("amqp:properties-filter")
    both = {props: Described(props, {symbol("subject"): "&p:order."}), **sql("amount < 100")}
    assert read_all(orders, both) == ["m1", "m2"]


def test_one_sql_filter_per_link(orders):
    two = {**sql("region = 'emea'"), symbol("another"): Described(SQL, "amount > 100")}
    with pytest.raises(LinkDetached, match="one amqp:sql-filter per link"):
        orders.create_receiver("/queues/orders", options=Filter({OFFSET_SPEC: Described(OFFSET_SPEC, "first"), **two}))


def test_the_length_limit_is_a_setting(broker_factory):
    node = broker_factory(stream_sql_filter_max_length=20)
    node.declare_queue("orders", **{"x-queue-type": "stream"})
    conn = BlockingConnection(node.url, timeout=10)
    publish_orders(conn, "orders")
    assert read_all(conn, sql("region = 'apj'")) == ["m3"]  # 14 characters
    with pytest.raises(LinkDetached, match="more than the 20 allowed"):
        conn.create_receiver("/queues/orders", options=Filter(sql("region IN ('apj', 'emea')")))
    conn.close()


class Collect(AMQPMessagingHandler):
    def __init__(self, n: int):
        super().__init__()
        self.n = n
        self.bodies: list[bytes] = []

    def on_amqp_message(self, event: Event) -> None:
        self.bodies.append(bytes(event.message.body))
        self.delivery_context.accept(event)
        if len(self.bodies) == self.n:
            raise Done()


class Done(Exception):
    pass


def test_the_official_client_sql_option(broker):
    environment = Environment(uri=f"amqp://guest:guest@localhost:{broker.port}/")
    connection = environment.connection()
    connection.dial()
    try:
        connection.management().declare_queue(StreamSpecification(name="events"))
        address = AddressHelper.queue_address("events")
        publisher = connection.publisher(address)
        for i, (region, amount) in enumerate([("emea", 10), ("amer", 200), ("emea", 300), (None, 400)]):
            properties = {"amount": amount} if region is None else {"region": region, "amount": amount}
            publisher.publish(ClientMessage(body=Converter.string_to_bytes(f"e{i}"), application_properties=properties))
        publisher.close()
        for expression, expected in [("region = 'emea' AND amount > 100", [b"e2"]),
                                     ("region IS NULL OR amount < 100", [b"e0", b"e3"])]:  # fmt: skip
            handler = Collect(len(expected))
            options = StreamConsumerOptions(offset_specification=OffsetSpecification.first,
                                            filter_options=StreamFilterOptions(sql=expression))  # fmt: skip
            consumer = connection.consumer(address, message_handler=handler, consumer_options=options)
            with pytest.raises(Done):
                consumer.run()
            consumer.close()
            assert handler.bodies == expected
        # an invalid expression: the client cannot attach
        with pytest.raises(Exception, match="invalid-field"):
            options = StreamConsumerOptions(offset_specification=OffsetSpecification.first,
                                            filter_options=StreamFilterOptions(sql="region = = 'emea'"))  # fmt: skip
            connection.consumer(address, message_handler=Collect(1), consumer_options=options).run()
    finally:
        environment.close()
