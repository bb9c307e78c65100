"""Address format v2; the bad addresses are those of RabbitMQ's
amqp_address_SUITE (bad_v2_addresses), which must all be refused."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqp.errors import AMQPError, Condition
from routing.address import (
    ExchangeTarget,
    QueueSource,
    QueueTarget,
    exchange_address,
    format_source,
    format_target,
    parse_source,
    parse_target,
    queue_address,
)
from routing.errors import AddressError


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("/exchanges/amq.direct/my-key", ExchangeTarget("amq.direct", "my-key")),
        ("/exchanges/amq.fanout", ExchangeTarget("amq.fanout", None)),
        ("/exchanges/amq.fanout/", ExchangeTarget("amq.fanout", "")),
        ("/exchanges/my%2Fexchange/my%2Fkey", ExchangeTarget("my/exchange", "my/key")),
        ("/exchanges/%F0%9F%91%89/%F0%9F%97%9D%EF%B8%8F", ExchangeTarget("👉", "🗝️")),
        ("/exchanges/x/a.b.%23", ExchangeTarget("x", "a.b.#")),
        ("/queues/q1", QueueTarget("q1")),
        ("/queues/my%2fqueue", QueueTarget("my/queue")),
        ("/queues/%F0%9F%8E%88", QueueTarget("🎈")),
        ("/queues/a:b@c", QueueTarget("a:b@c")),
    ],
)
def test_parse_target(address, expected):
    assert parse_target(address) == expected


BAD_V2_ADDRESSES = [
    "/topic/mytopic",
    "/amq/queue/myqueue",
    "myqueue",
    "/queue",
    "",
    "\x00",
    "/",
    "//",
    "/queues",
    "/queues/",
    "/queue/",
    "/exchanges",
    "/exchanges/",
    "/exchanges//",
    "/exchanges//mykey",
    "/exchanges/amq.default",
    "/exchanges/amq.default/",
    "/exchanges/amq.default/mykey",
    "/ex/✋",
    "/exchange",
    "/exchange/",
    "/exchange/amq.default",
    "/exchange//key/",
    "/exchange//key/mykey",
    "/exchange/amq.default/key/",
    "/exchange/amq.default/key/mykey",
    "/queues/missing%encoding",
    "/queues/missing/encoding",
    "/queues/✋",
    "/exchanges/missing%encoding",
    "/exchanges/missing/encoding/routingkey",
    "/exchanges/exchange/missing%encoding",
    "/exchanges/✋",
    # ours: not percent-encoded, or not UTF-8 once decoded
    "/queues/a b",
    "/queues/a#b",
    "/queues/%FF",
    "/queues/%",
    "/exchanges/x/y z",
]


@pytest.mark.parametrize("address", BAD_V2_ADDRESSES)
def test_bad_target_is_invalid_field(address):
    with pytest.raises(AddressError) as info:
        parse_target(address)
    assert isinstance(info.value, AMQPError)
    assert info.value.condition == Condition.INVALID_FIELD


@pytest.mark.parametrize("address", [None, 42, b"/queues/q"])
def test_non_string_address(address):
    with pytest.raises(AddressError):
        parse_target(address)
    with pytest.raises(AddressError):
        parse_source(address)


def test_parse_source():
    assert parse_source("/queues/q%20one") == QueueSource("q one")


@pytest.mark.parametrize(
    "address",
    ["/exchanges/amq.direct/k", "/exchange/myroutingkey", "/topic/mytopic", "/amq/queue/myqueue",
     "myqueue", "/queues/", "/queues/a/b", "/qqq/🎈"],
)
def test_bad_source(address):
    with pytest.raises(AddressError):
        parse_source(address)


def test_build_addresses():
    assert exchange_address("amq.direct", "k") == "/exchanges/amq.direct/k"
    assert exchange_address("amq.fanout") == "/exchanges/amq.fanout"
    assert exchange_address("amq.fanout", "") == "/exchanges/amq.fanout/"
    assert exchange_address("my/x", "a b") == "/exchanges/my%2Fx/a%20b"
    assert queue_address("🎈") == "/queues/%F0%9F%8E%88"
    assert format_target(QueueTarget("q")) == "/queues/q"
    assert format_target(ExchangeTarget("x", None)) == "/exchanges/x"
    assert format_source(QueueSource("q/1")) == "/queues/q%2F1"


@pytest.mark.parametrize("name", ["", "amq.default"])
def test_default_exchange_has_no_exchange_address(name):
    with pytest.raises(AddressError):
        exchange_address(name, "k")


def test_empty_queue_has_no_address():
    with pytest.raises(AddressError):
        queue_address("")


names = st.text(min_size=1)


@given(names, st.none() | st.text())
def test_exchange_round_trip(exchange, key):
    if exchange == "amq.default":
        return
    target = ExchangeTarget(exchange, key)
    assert parse_target(format_target(target)) == target


@given(names)
def test_queue_round_trip(queue):
    assert parse_target(queue_address(queue)) == QueueTarget(queue)
    assert parse_source(queue_address(queue)) == QueueSource(queue)
