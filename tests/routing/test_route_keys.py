"""RoutingTable.route_keys: a message with several routing keys (the x-cc annotation)."""

import pytest

from routing.errors import NotFound
from routing.table import RoutingTable


@pytest.fixture
def table():
    t = RoutingTable()
    for q in ("q1", "q2", "q3"):
        t.add_queue(q)
    return t


def test_route_keys_reaches_each_queue_once_and_the_alternate_only_when_no_key_routes(table):
    assert table.route_keys("", ["q1", "q2", "q1", "nope"]) == {"q1", "q2"}
    table.declare_exchange("ae", "fanout")
    table.bind("ae", "queue", "q3", "")
    table.declare_exchange("x", "direct", arguments={"alternate-exchange": "ae"})
    table.bind("x", "queue", "q1", "a")
    table.bind("x", "queue", "q2", "b")
    assert table.route_keys("x", ["a", "b", "a"]) == {"q1", "q2"}
    assert table.route_keys("x", ["a", "unbound"]) == {"q1"}  # one key routed: no alternate
    assert table.route_keys("x", ["none", "unbound"]) == {"q3"}
    table.declare_exchange("t", "topic")
    table.bind("t", "exchange", "x", "#")  # through an exchange-to-exchange binding too
    assert table.route_keys("t", ["a", "b"]) == {"q1", "q2"}
    with pytest.raises(NotFound):
        table.route_keys("missing", ["a"])
