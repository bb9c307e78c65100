"""The pure helpers behind the management API's JSON (no node needed)."""

from __future__ import annotations

import json

import pytest

from amqp.types import Symbol, UInt
from node.http import formats as fmt
from routing.model import Binding


def test_select_columns_keeps_named_and_dotted_fields():
    item = {"name": "q", "messages": 3, "message_stats": {"publish": 5, "ack": 1}, "other": 1}
    assert fmt.select_columns(item, ["name", "message_stats.publish", "missing"]) == {
        "name": "q",
        "message_stats": {"publish": 5},
    }
    assert fmt.select_columns([item, item], ["name"]) == [{"name": "q"}, {"name": "q"}]
    assert fmt.select_columns(item, None) is item


def test_properties_key_names_a_binding():
    assert fmt.properties_key("", {}) == "~"
    assert fmt.properties_key("a.b", None) == "a.b"
    assert fmt.properties_key("a/b c", {}) == "a%2Fb%20c"
    with_args = fmt.properties_key("k", {"x-match": "all", "a": 1})
    assert with_args.startswith("k~") and with_args == fmt.properties_key("k", {"a": 1, "x-match": "all"})
    assert with_args != fmt.properties_key("k", {"x-match": "any", "a": 1})


def test_binding_json_uses_rabbitmq_field_names():
    b = Binding("x", "exchange", "y", "rk", {"a": 1})
    assert fmt.binding_json("/", b) == {
        "source": "x",
        "vhost": "/",
        "destination": "y",
        "destination_type": "exchange",
        "routing_key": "rk",
        "arguments": {"a": 1},
        "properties_key": fmt.properties_key("rk", {"a": 1}),
    }


@pytest.mark.parametrize(
    "tags, expected",
    [
        (None, []),
        ("", []),
        ("administrator", ["administrator"]),
        ("a, b,,c", ["a", "b", "c"]),
        (["x", " y "], ["x", "y"]),
    ],
)
def test_tags_as_string_or_list(tags, expected):
    assert fmt.parse_tags(tags) == expected


@pytest.mark.parametrize("tags", [5, ["a", 1], {"a": 1}])
def test_bad_tags_are_refused(tags):
    with pytest.raises(ValueError):
        fmt.parse_tags(tags)


def test_dumps_handles_amqp_values():
    out = json.loads(fmt.dumps({"s": Symbol("sym"), "n": UInt(7), "b": b"\x00\x01", "t": (1, 2)}))
    assert out == {"s": "sym", "n": 7, "b": "AAE=", "t": [1, 2]}


def test_rates_are_per_second_over_the_older_sample():
    now = [100.0]
    rates = fmt.Rates(clock=lambda: now[0])
    assert rates.rates({"publish": 10}) == {}
    rates.sample({"publish": 0})
    now[0] = 105.0
    rates.sample({"publish": 50})
    now[0] = 110.0
    assert rates.rates({"publish": 100}) == {"publish": 10.0}  # (100 - 0) / 10 s
    rates.sample({"publish": 100})
    assert rates.rates({"publish": 100}) == {"publish": 10.0}  # (100 - 50) / 5 s
