"""The x-consistent-hash exchange: weights, stability, hashing on a header or
a property, and the plugin's refusals."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from types import SimpleNamespace

import pytest

from routing.consistent_hash import jump_hash, stable_hash
from routing.errors import PreconditionFailed
from routing.table import RoutingTable

KEYS = [f"order-{i}" for i in range(4000)]


def hashing_table(
    queues: dict[str, int], arguments: dict | None = None, order: list[str] | None = None
) -> RoutingTable:
    t = RoutingTable()
    t.declare_exchange("chx", "x-consistent-hash", arguments=arguments)
    for name in order or list(queues):
        t.add_queue(name)
        t.bind("chx", "queue", name, str(queues[name]))
    return t


def spread(t: RoutingTable, keys: list[str] = KEYS) -> dict[str, str]:
    out = {}
    for key in keys:
        (queue,) = t.route("chx", key)
        out[key] = queue
    return out


def test_each_key_reaches_one_queue_in_proportion_to_the_weights():
    counts = Counter(spread(hashing_table({"a": 1, "b": 1, "c": 2})).values())
    assert set(counts) == {"a", "b", "c"}
    assert abs(counts["c"] / len(KEYS) - 0.5) < 0.05
    assert abs(counts["a"] / len(KEYS) - 0.25) < 0.05


def test_the_bucket_layout_does_not_depend_on_the_order_of_the_bindings():
    weights = {"a": 3, "b": 1, "c": 2}
    assert spread(hashing_table(weights)) == spread(hashing_table(weights, order=["c", "a", "b"]))


def test_the_same_key_reaches_the_same_queue_in_another_process():
    """Python salts str hashes per process: the exchange must not use them."""
    here = spread(hashing_table({"a": 1, "b": 1, "c": 1}), KEYS[:50])
    code = (
        "import json, sys; sys.path.insert(0, '.');"
        "from tests.routing.test_consistent_hash import hashing_table, spread, KEYS;"
        "print(json.dumps(spread(hashing_table({'a': 1, 'b': 1, 'c': 1}), KEYS[:50])))"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "12345"})  # fmt: skip
    assert eval(other.stdout) == here  # noqa: S307 - our own JSON of str to str


def test_a_new_queue_takes_keys_only_from_the_others_never_moves_them_between_them():
    before = spread(hashing_table({"a": 1, "b": 1}))
    t = hashing_table({"a": 1, "b": 1, "c": 1})
    after = spread(t)
    moved = [k for k in KEYS if before[k] != after[k]]
    assert moved and all(after[k] == "c" for k in moved)
    assert 0.25 < len(moved) / len(KEYS) < 0.42
    t.unbind("chx", "queue", "c", "1")
    assert spread(t) == before


def test_unbinding_the_last_binding_of_a_queue_and_deleting_it():
    t = hashing_table({"a": 1, "b": 1})
    t.bind("chx", "queue", "a", "5")  # the heaviest binding counts while it lasts
    heavy = Counter(spread(t).values())
    assert heavy["a"] > 4 * heavy["b"]
    t.unbind("chx", "queue", "a", "5")
    even = Counter(spread(t).values())
    assert abs(even["a"] - even["b"]) < 0.1 * len(KEYS)
    t.remove_queue("a")
    assert set(spread(t).values()) == {"b"}
    t.remove_queue("b")
    assert t.route("chx", "k") == set()


def test_hash_header_routes_by_the_header_and_a_missing_header_still_routes():
    t = hashing_table({"a": 1, "b": 1, "c": 1, "d": 1}, {"hash-header": "user"})
    by_user = {t.route("chx", "same-key", {"user": f"u{i}"}).pop() for i in range(40)}
    assert len(by_user) == 4  # the routing key is ignored, the header decides
    assert t.route("chx", "k1", lambda: {"user": "u7"}) == t.route("chx", "k2", {"user": "u7"})
    assert len(t.route("chx", "k", None)) == 1 and t.route("chx", "k", {}) == t.route("chx", "j", {})


def test_hash_property_routes_by_message_id_correlation_id_or_timestamp_seconds():
    t = hashing_table({"a": 1, "b": 1, "c": 1, "d": 1}, {"hash-property": "message_id"})

    def message(**props):
        fields = {"application_properties": None, "message_id": None, "correlation_id": None, "creation_time": None}
        return SimpleNamespace(**{**fields, **props})

    assert len({t.route("chx", "k", message(message_id=f"m{i}")).pop() for i in range(40)}) == 4
    assert t.route("chx", "x", message(message_id=7)) == t.route("chx", "y", message(message_id=7))
    ts = hashing_table({"a": 1, "b": 1, "c": 1, "d": 1}, {"hash-property": "timestamp"})
    same_second = {ts.route("chx", "k", message(creation_time=1_700_000_000_000 + ms)).pop() for ms in (0, 500, 999)}
    assert len(same_second) == 1
    seconds = {ts.route("chx", "k", message(creation_time=1_700_000_000_000 + s * 1000)).pop() for s in range(40)}
    assert len(seconds) == 4


@pytest.mark.parametrize(
    "arguments, error",
    [
        ({"hash-header": "h", "hash-property": "message_id"}, "mutually exclusive"),
        ({"hash-property": "user_id"}, "Unsupported property"),
        ({"hash-header": 5}, "hash-header must be a string"),
    ],
)
def test_bad_exchange_arguments_are_refused(arguments, error):
    with pytest.raises(PreconditionFailed, match=error):
        RoutingTable().declare_exchange("chx", "x-consistent-hash", arguments=arguments)


@pytest.mark.parametrize(
    "key, error",
    [("", "must be an integer"), ("heavy", "must be an integer"), ("0", "greater than 0"), ("10001", "not exceed")],
)
def test_a_binding_key_is_a_weight_from_1_to_10000(key, error):
    t = hashing_table({"a": 1})
    with pytest.raises(PreconditionFailed, match=error):
        t.bind("chx", "queue", "a", key)


def test_jump_hash_matches_the_published_algorithm():
    # values from Lamping and Veach's reference implementation
    assert [jump_hash(k, 1) for k in range(5)] == [0] * 5
    assert jump_hash(0, 100) == 0
    buckets = Counter(jump_hash(stable_hash(k), 10) for k in KEYS)
    assert set(buckets) == set(range(10)) and min(buckets.values()) > 300
    # growing from n to n+1 buckets moves a key only into the new bucket
    assert all(jump_hash(h, 11) in (jump_hash(h, 10), 10) for h in map(stable_hash, KEYS))
