"""Address formats v2 and v1; the bad v2 addresses are those of RabbitMQ's
amqp_address_SUITE (bad_v2_addresses), which must all be refused; the v1
forms are those of RabbitMQ 4's AMQP 1.0 guide ("Address v1")."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqp.errors import AMQPError, Condition
from routing.address import (
    V1_NOT_PERMITTED,
    ExchangeSource,
    ExchangeTarget,
    QueueSource,
    QueueTarget,
    exchange_address,
    format_source,
    format_target,
    parse_link_source,
    parse_link_target,
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


# ---------------------------------------------------------------- v1


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("/exchange/amq.direct/my-key", ExchangeTarget("amq.direct", "my-key")),
        ("/exchange/amq.fanout", ExchangeTarget("amq.fanout", None)),  # the subject is the key
        ("/exchange/amq.fanout/", ExchangeTarget("amq.fanout", None)),  # an empty key too
        ("/exchange/my x/a b", ExchangeTarget("my x", "a b")),  # names are raw in v1
        ("/exchange/x%2Fy/k%2F1", ExchangeTarget("x/y", "k/1")),  # its one escape
        ("/exchange/x/a%20b", ExchangeTarget("x", "a%20b")),  # and only that one
        ("/topic/a.b.#", ExchangeTarget("amq.topic", "a.b.#")),
        ("/amq/queue/q1", QueueTarget("q1", declare=False)),
        ("/queue/q1", QueueTarget("q1", declare=True)),
        ("q1", QueueTarget("q1", declare=True)),
        ("/queue", ExchangeTarget("", None)),  # the default exchange, the subject names the queue
        ("/queue/🎈", QueueTarget("🎈", declare=True)),
    ],
)
def test_v1_target(address, expected):
    assert parse_link_target(address, permit_v1=True) == expected


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("/exchange/amq.direct/my-key", ExchangeSource("amq.direct", "my-key")),
        ("/exchange/amq.fanout", ExchangeSource("amq.fanout", "")),
        ("/topic/a.*.c", ExchangeSource("amq.topic", "a.*.c")),
        ("/amq/queue/q1", QueueSource("q1", declare=False)),
        ("/queue/q1", QueueSource("q1", declare=True)),
        ("q1", QueueSource("q1", declare=True)),
    ],
)
def test_v1_source(address, expected):
    assert parse_link_source(address, permit_v1=True) == expected


BAD_V1_ADDRESSES = ["", "/", "//", "/exchange", "/exchange/", "/exchange//key", "/exchange/x/k/more",
                    "/topic", "/topic/", "/topic/a/b", "/amq", "/amq/queue", "/amq/queue/", "/amq/queue/a/b",
                    "/queue/", "/queue/a/b", "a/b", "/queues", "/exchanges", "/temp-queue/x", "/wrong/address"]


@pytest.mark.parametrize("address", BAD_V1_ADDRESSES)
def test_bad_v1_address_is_invalid_field(address):
    for parse in (parse_link_target, parse_link_source):
        with pytest.raises(AddressError) as info:
            parse(address, permit_v1=True)
        assert info.value.condition == Condition.INVALID_FIELD
        assert V1_NOT_PERMITTED not in info.value.description


def test_v1_queue_without_name_is_no_source():
    """`/queue` (the subject names the queue) makes sense for publishing only."""
    with pytest.raises(AddressError):
        parse_link_source("/queue", permit_v1=True)


@pytest.mark.parametrize("address", ["/exchange/amq.direct/k", "/topic/t", "/amq/queue/q", "/queue/q", "q", "/queue",
                                     "/wrong/address", ""])
def test_v1_refused_when_not_permitted(address):
    """As RabbitMQ with amqp_address_v1 denied: whatever is not v2 is v1, and refused."""
    for parse in (parse_link_target, parse_link_source):
        with pytest.raises(AddressError) as info:
            parse(address, permit_v1=False)
        assert info.value.condition == Condition.INVALID_FIELD
        assert V1_NOT_PERMITTED in info.value.description


@pytest.mark.parametrize("permit_v1", [True, False])
def test_v2_addresses_read_the_same_either_way(permit_v1):
    assert parse_link_target("/exchanges/x/k", permit_v1) == ExchangeTarget("x", "k")
    assert parse_link_target("/queues/q%20one", permit_v1) == QueueTarget("q one")
    assert parse_link_source("/queues/q%20one", permit_v1) == QueueSource("q one")
    for bad in ("/queues/", "/queues/a/b", "/exchanges/amq.default/k"):
        with pytest.raises(AddressError) as info:
            parse_link_target(bad, permit_v1)
        assert V1_NOT_PERMITTED not in info.value.description
    # an exchange is no v2 source, and not the v1 /exchange/ form either
    with pytest.raises(AddressError):
        parse_link_source("/exchanges/amq.direct/k", permit_v1)


@given(st.text(min_size=1).filter(lambda s: "/" not in s))
def test_v1_bare_name_is_a_declared_queue(name):
    assert parse_link_target(name, permit_v1=True) == QueueTarget(name.replace("%2F", "/"), declare=True)
