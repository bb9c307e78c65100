"""Evaluating SQL filter expressions on real encoded messages: each
section's fields, NULL and three-valued logic, types as RabbitMQ 4.2 treats
them, and sections decoded only when the expression reads them."""

from __future__ import annotations

import uuid

import pytest

from amqp.definitions import ApplicationProperties
from amqp.encoder import dumps
from amqp.message import Message
from amqp.types import Described, Int, Long, Symbol, Timestamp, UByte, UInt, ULong
from queues.stream.sql import SqlFilter

APP = {
    "region": "emea", "n": Int(3), "big": ULong(10**19), "price": 99.5, "ok": True, "off": False,
    "quote": "It's", "none": None, "sym": Symbol("s"), "raw": b"\x01\x02", "zero": Long(0), "neg": Int(-7),
    "id": uuid.UUID(int=1), "list": [1, 2],
}  # fmt: skip
PROPS = {
    "message_id": 12345, "user_id": b"Bob", "to": "orders", "subject": "Order.created", "reply_to": "/queues/q1",
    "correlation_id": "c-1", "content_type": Symbol("application/json"), "content_encoding": Symbol("gzip"),
    "absolute_expiry_time": Timestamp(2_000), "creation_time": Timestamp(1_000), "group_id": "Group A",
    "group_sequence": UInt(9), "reply_to_group_id": "Group B",
}  # fmt: skip
MESSAGE = Message.build(b"body", header={"priority": UByte(7)}, properties=PROPS, application_properties=APP)
BARE = Message.build(b"body")  # no header, properties or application properties


def value(text: str, message: Message = MESSAGE, now: int = 1_500):
    return SqlFilter(text, clock=lambda: now).evaluate(message)


@pytest.mark.parametrize(
    "text",
    [
        "h.priority = 7", "header.priority > 4",
        "p.message_id = 12345", "p.user_id = 0x426F62", "p.to = 'orders'", "p.subject LIKE 'Order%'",
        "p.reply_to = '/queues/q1'", "p.correlation_id IS NOT NULL", "p.content_type = 'application/json'",
        "p.content_encoding IN ('gzip', 'zstd', 'deflate')", "p.absolute_expiry_time > UTC()",
        "p.creation_time < UTC()", "p.creation_time = 1000", "p.group_id = 'Group A'", "p.group_sequence % 3 = 0",
        "properties.reply_to_group_id = 'Group B'",
        "region = 'emea'", "a.region = 'emea'", "application_properties.region = 'emea'", "[region] = 'emea'",
        "quote = 'It''s'", "quote = \"It's\"", "sym = 's'", "raw = 0x0102", "ok", "ok = TRUE", "NOT off",
        "off = FALSE", "n = 3", "n = 3.0", "n + 0.5 = 3.5", "big > 10000000000000000000 - 1", "price >= 99.5",
        "price * 2 = 199", "n / 2 = 1.5", "neg % 4 = -3", "-n = -3", "+n = 3", "n - 10 = neg", "region <> 'us'",
        "region <> 3",  # unlike types are unequal: <> is the negation of = (as RabbitMQ)
        "region > 'abc'", "raw < 0x03", "p.creation_time > UTC() - 1000",
    ],
)  # fmt: skip
def test_true(text):
    assert value(text) is True


@pytest.mark.parametrize(
    "text",
    [
        "h.priority < 7", "p.subject LIKE 'order%'", "region = 3", "region > 3", "ok > FALSE", "n = '3'",
        "raw = 'x'", "p.user_id = 'Bob'",  # binary is not a string
        "id = 'x'", "region IN ('us', 'apj')", "n IN ('3')", "n NOT IN (1, 2, 3)", "region NOT LIKE 'e%'",
        "p.absolute_expiry_time < UTC()", "NOT ok", "ok AND off", "off OR off",
    ],
)  # fmt: skip
def test_false(text):
    assert value(text) is False


@pytest.mark.parametrize(
    "text",
    [
        "missing = 1", "missing <> 1", "none = 1", "missing > 1", "1 = missing", "missing + 1 = 2",
        "NOT missing", "missing IN ('a')", "missing NOT IN ('a')", "missing LIKE 'a%'", "missing NOT LIKE 'a%'",
        "n LIKE '3'",  # LIKE on a non-string
        "n / zero = 1", "n % zero = 1", "price % 2 = 1", "region + 1 = 2", "-region = 1",
        "region AND ok",  # a non-boolean as a condition
        "p.subject = 'x'",
    ],
)  # fmt: skip
def test_unknown(text):
    message = BARE if text.startswith("p.") else MESSAGE
    assert value(text, message) is None
    assert not SqlFilter(text).matches(message)


def test_three_valued_logic():
    """JMS 3.1 tables 3-4 (AND), 3-5 (OR), 3-6 (NOT), with `missing = 1` as unknown."""
    t, f, u = "n = 3", "n = 4", "missing = 1"
    ands = {(t, t): True, (t, f): False, (t, u): None, (f, t): False, (f, f): False, (f, u): False,
            (u, t): None, (u, f): False, (u, u): None}  # fmt: skip
    ors = {(t, t): True, (t, f): True, (t, u): True, (f, t): True, (f, f): False, (f, u): None,
           (u, t): True, (u, f): None, (u, u): None}  # fmt: skip
    for (x, y), expected in ands.items():
        assert value(f"{x} AND {y}") is expected, (x, y)
    for (x, y), expected in ors.items():
        assert value(f"{x} OR {y}") is expected, (x, y)
    assert [value(f"NOT ({x})") for x in (t, f, u)] == [False, True, None]
    # IS NULL is never unknown: an absent property and a property set to null are both NULL
    assert value("missing IS NULL") is True and value("none IS NULL") is True and value("n IS NULL") is False


def test_absent_sections_read_as_null_and_priority_as_4():
    assert value("h.priority = 4", BARE) is True  # [3.2.1] the default when no header is sent
    assert value("p.subject IS NULL AND region IS NULL", BARE) is True


def test_in_with_expressions_and_mixed_literals():
    assert value("n IN (1, 2, 1 + 2)") is True
    assert value("n IN ('3', 3.0)") is True  # the number matches, the string does not
    assert value("ok IN (1, TRUE)") is True and value("ok IN (1)") is False  # TRUE is not 1
    assert value("raw IN (0x0102, 'x')") is True
    assert value("n IN (missing, 3)") is True and value("n IN (missing)") is False


def test_integer_results_stay_within_64_bits():
    assert value("big * big > 0") is True
    assert isinstance(SqlFilter("big * big").evaluate(MESSAGE), float)
    assert isinstance(SqlFilter("n * n").evaluate(MESSAGE), int)


def test_utc_reads_the_clock_per_message():
    times = iter([1_000, 3_000])
    f = SqlFilter("p.absolute_expiry_time > UTC()", clock=lambda: next(times))
    assert f.evaluate(MESSAGE) is True and f.evaluate(MESSAGE) is False


def test_only_the_sections_read_are_decoded():
    """Properties that do not decode (a subject that is an int) leave an application-properties
    filter working: that section is never decoded. Reading them is no match, not an error."""
    app = bytearray()
    ApplicationProperties({"region": "emea"}).encode_into(app)
    payload = dumps(Described(ULong(0x73), [None, None, None, Int(5)])) + bytes(app)
    assert SqlFilter("region = 'emea'").matches(Message.from_bytes(payload))
    assert not SqlFilter("p.subject = 'x' OR region = 'emea'").matches(Message.from_bytes(payload))
