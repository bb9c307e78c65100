"""RoutingTable.targets, the publish path's lookup, remembers answers per
(exchange, key): after any change to the table it must answer what `route`
answers, and answers that depend on more than the key are never kept."""

import random

from routing import route_memo
from routing.table import RoutingTable


def fanout_to_three() -> RoutingTable:
    t = RoutingTable("/")
    for name in ("s0", "s1", "s2"):
        t.add_queue(name)
    t.declare_exchange("fan", "fanout")
    for name in ("s0", "s1", "s2"):
        t.bind("fan", "queue", name)
    return t


def test_a_fanout_is_looked_up_once_per_key_and_forgotten_on_change():
    t = fanout_to_three()
    first = t.targets("fan", "")
    assert sorted(first) == ["s0", "s1", "s2"]
    assert t.targets("fan", "") is first  # remembered
    t.unbind("fan", "queue", "s1")
    assert sorted(t.targets("fan", "")) == ["s0", "s2"]
    t.remove_queue("s2")
    assert t.targets("fan", "") == ("s0",)
    t.add_queue("s3")
    t.bind("fan", "queue", "s3")
    assert sorted(t.targets("fan", "")) == ["s0", "s3"]
    t.delete_exchange("fan")
    try:
        t.targets("fan", "")
    except Exception as e:  # noqa: BLE001
        assert type(e).__name__ == "NotFound"
    else:
        raise AssertionError("a deleted exchange still routes")


def test_alternates_exchange_bindings_headers_and_random_are_not_remembered():
    t = fanout_to_three()
    t.declare_exchange("dx", "direct")
    t.declare_exchange("hx", "headers")
    t.bind("hx", "queue", "s0", "", {"x-match": "all", "a": 1})
    t.declare_exchange("lr", "x-local-random")
    t.bind("lr", "queue", "s0")
    t.bind("lr", "queue", "s1")
    assert t.targets("hx", "", {"a": 1}) == ("s0",)
    assert t.targets("hx", "", {"a": 2}) == ()  # the headers decide, not the key
    t.set_policy_alternate("dx", "hx")
    assert t.targets("dx", "nothing-bound", {"a": 1}) == ("s0",)
    assert t.targets("dx", "nothing-bound", {"a": 2}) == ()  # through the alternate: the headers again
    for _ in range(20):
        t.targets("lr", "")
    assert not any(key[0] in ("hx", "dx", "lr") for key in t._memo.routes)
    t.bind("fan", "exchange", "dx", "")  # an exchange-to-exchange binding: walked, not remembered
    t.bind("dx", "queue", "s2", "k")
    assert sorted(t.targets("fan", "k")) == ["s0", "s1", "s2"]
    assert ("fan", "k") not in t._memo.routes


def test_targets_agree_with_route_through_random_changes():
    rng = random.Random(19)
    t = RoutingTable("/")
    queues = [f"q{i}" for i in range(6)]
    exchanges = [("f", "fanout"), ("d", "direct"), ("t", "topic")]
    for name, kind in exchanges:
        t.declare_exchange(name, kind)
    keys = ["a", "b", "a.b", "#"]
    for _ in range(400):
        op = rng.random()
        q, (x, _), key = rng.choice(queues), rng.choice(exchanges), rng.choice(keys)
        if op < 0.2:
            t.add_queue(q)
        elif op < 0.3:
            t.remove_queue(q)
        elif op < 0.6 and t.has_queue(q):
            t.bind(x, "queue", q, key)
        elif op < 0.75:
            t.unbind(x, "queue", q, key)
        for name, _ in exchanges:
            for k in keys[:3]:
                assert sorted(t.targets(name, k)) == sorted(t.route(name, k))


def test_the_memo_starts_over_when_full(monkeypatch):
    monkeypatch.setattr(route_memo, "MAX_ROUTES", 3)
    t = RoutingTable("/")
    t.add_queue("q")
    t.bind("amq.topic", "queue", "q", "#")
    for i in range(10):
        assert t.targets("amq.topic", f"k{i}") == ("q",)
        assert len(t._memo.routes) <= 3
