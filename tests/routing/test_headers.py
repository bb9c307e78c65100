"""Headers matching, case by case against rabbit_exchange_type_headers."""

import pytest

from amqp.errors import Condition
from amqp.types import Symbol, UInt
from routing.errors import PreconditionFailed
from routing.headers import HeadersMatcher, headers_match, validate_arguments, values_equal


@pytest.mark.parametrize(
    ("args", "headers", "expected"),
    [
        # all (default)
        ({"a": 1, "b": "x"}, {"a": 1, "b": "x", "c": 3}, True),
        ({"a": 1, "b": "x"}, {"a": 1}, False),
        ({"a": 1, "b": "x"}, {"a": 1, "b": "y"}, False),
        ({"x-match": "all", "a": 1}, {"a": 1}, True),
        ({}, {}, True),  # nothing to compare: all matches everything
        ({}, None, True),
        # any
        ({"x-match": "any", "a": 1, "b": 2}, {"b": 2}, True),
        ({"x-match": "any", "a": 1, "b": 2}, {"a": 2, "b": 1}, False),
        ({"x-match": "any"}, {"a": 1}, False),  # nothing to compare: any matches nothing
        ({"x-match": "any", "a": 1}, None, False),
        # void pattern value: presence only
        ({"a": None}, {"a": "anything"}, True),
        ({"a": None}, {"a": None}, True),
        ({"a": None}, {"b": 1}, False),
        ({"x-match": "any", "a": None, "b": 1}, {"a": 0}, True),
        ({"a": 1}, {"a": None}, False),
        # x- keys ignored unless -with-x
        ({"x-foo": "bar", "a": 1}, {"a": 1}, True),
        ({"x-match": "any", "x-foo": "bar"}, {"x-foo": "bar"}, False),
        ({"x-match": "all-with-x", "x-foo": "bar", "a": 1}, {"a": 1}, False),
        ({"x-match": "all-with-x", "x-foo": "bar", "a": 1}, {"a": 1, "x-foo": "bar"}, True),
        ({"x-match": "any-with-x", "x-foo": "bar", "a": 1}, {"x-foo": "bar"}, True),
        ({"x-match": "any-with-x", "x-foo": "bar"}, {"x-foo": "baz"}, False),
        # x-match itself never takes part, even with -with-x
        ({"x-match": "all-with-x"}, {}, True),
        # value comparison
        ({"a": 1}, {"a": 1.0}, True),
        ({"a": 1}, {"a": UInt(1)}, True),
        ({"a": True}, {"a": 1}, False),
        ({"a": 1}, {"a": True}, False),
        ({"a": True}, {"a": True}, True),
        ({"a": "v"}, {"a": Symbol("v")}, True),
        ({"a": "v"}, {"a": b"v"}, True),
        ({"a": b"v"}, {"a": "v"}, True),
        ({"a": "1"}, {"a": 1}, False),
        ({"a": [1, 2]}, {"a": [1, 2]}, True),
    ],
)
def test_headers_match(args, headers, expected):
    assert headers_match(args, headers) is expected


@pytest.mark.parametrize("x_match", ["none", "ALL", 1, None, b"all"])
def test_invalid_x_match(x_match):
    with pytest.raises(PreconditionFailed) as info:
        validate_arguments({"x-match": x_match})
    assert info.value.condition == Condition.PRECONDITION_FAILED


def test_valid_x_match_and_symbol():
    for value in ("all", "any", "all-with-x", "any-with-x", Symbol("any")):
        validate_arguments({"x-match": value})
    validate_arguments(None)
    assert HeadersMatcher({"x-match": Symbol("any"), "a": 1}).match_all is False


def test_values_equal():
    assert values_equal(0, 0.0)
    assert not values_equal(False, 0)
    assert not values_equal("é", b"e")
    assert values_equal("é", "é".encode())
