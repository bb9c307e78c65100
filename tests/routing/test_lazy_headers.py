"""Issue 14, row 6, in the routing table: the application-properties
function is called only by a headers exchange that has bindings, once per
exchange it crosses."""

from __future__ import annotations

import pytest

from routing.model import ExchangeType
from routing.table import RoutingTable


class Counting:
    def __init__(self, headers):
        self.headers, self.calls = headers, 0

    def __call__(self):
        self.calls += 1
        return self.headers


@pytest.fixture
def table():
    t = RoutingTable()
    for q in ("d", "t", "f", "h"):
        t.add_queue(q)
    t.bind("amq.direct", "queue", "d", "k")
    t.bind("amq.topic", "queue", "t", "k.#")
    t.bind("amq.fanout", "queue", "f")
    return t


@pytest.mark.parametrize("exchange,key,queue", [("amq.direct", "k", "d"), ("amq.topic", "k.x", "t"),
                                                ("amq.fanout", "", "f"), ("", "d", "d")])  # fmt: skip
def test_other_exchange_types_never_decode(table, exchange, key, queue):
    headers = Counting({"a": 1})
    assert table.route(exchange, key, headers) == {queue}
    assert headers.calls == 0


def test_a_headers_exchange_without_bindings_does_not_decode(table):
    headers = Counting({"a": 1})
    assert table.route("amq.headers", "", headers) == set()
    assert headers.calls == 0


def test_a_headers_exchange_decodes_and_matches(table):
    table.bind("amq.headers", "queue", "h", "", {"x-match": "any", "a": 1})
    headers = Counting({"a": 1})
    assert table.route("amq.headers", "", headers) == {"h"}
    assert headers.calls == 1
    assert table.route("amq.headers", "", Counting({"a": 2})) == set()
    assert table.route("amq.headers", "", {"a": 1}) == {"h"}  # a plain mapping still works


def test_exchange_to_exchange_reaches_a_headers_exchange(table):
    table.declare_exchange("hx", ExchangeType.HEADERS)
    table.bind("hx", "queue", "h", "", {"x-match": "all", "a": 1})
    table.bind("amq.fanout", "exchange", "hx")
    headers = Counting({"a": 1})
    assert table.route("amq.fanout", "", headers) == {"f", "h"}
    assert headers.calls == 1
