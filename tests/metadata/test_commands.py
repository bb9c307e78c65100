"""Metadata commands as raft/records.py records: every one round-trips, and
AMQP-typed arguments come back exactly as they were declared."""

from __future__ import annotations

import uuid

import pytest

from amqp.types import Array, Described, Long, Symbol, Timestamp, UByte, UInt, ULong
from metadata import commands as c
from raft import records

TYPED = {
    "x-max-length": UInt(10),
    "x-message-ttl": ULong(60_000),
    Symbol("x-sym"): Symbol("lazy"),
    "x-list": [UByte(1), "two", None, True],
    "x-map": {"nested": Timestamp(1_700_000_000_000), "n": Long(-3)},
    "x-float": 1.5,
    "x-bin": b"\x00\xff",
    "x-uuid": uuid.UUID(int=7),
    "x-array": Array([Symbol("a"), Symbol("b")]),
    "x-described": Described(Symbol("warren:test"), "v"),
}

SAMPLES = [
    c.AddVHost("k1", "/", "the default", ("prod", "eu")),
    c.AddVHostWithQueueType("k1b", "/", "the default", ("prod",), "quorum"),
    c.SetGlobalParameter("k1c", "cluster_name", "rabbit@old"),
    c.DeleteVHost("k2", "/"),
    c.PutUser("k3", "guest", "pbkdf2-sha256$1$00$00", ("administrator",)),
    c.DeleteUser("k4", "guest"),
    c.SetPermissions("k5", "guest", "/", "^q", "", ".*"),
    c.ClearPermissions("k6", "guest", "/"),
    c.DeclareExchange("k7", "/", "x", "topic", False, True, True, {"alternate-exchange": "ae", **TYPED}),
    c.DeleteExchange("k8", "/", "x", True),
    c.DeclareQueue("k9", "/", "q", "quorum", True, False, "n1/conn-9", TYPED, "n1", ("n1", "n2", "n3")),
    c.DeleteQueue("k10", "/", "q"),
    c.Bind("k11", "/", "amq.headers", "queue", "q", "", {"x-match": "any", "h": UInt(1)}),
    c.Unbind("k12", "/", "amq.headers", "exchange", "x", "k", {"x-match": "all"}),
    c.SetPolicy("k13", "/", "ttl", "^q\\.", "queues", {"message-ttl": UInt(5), "dead-letter-exchange": "dlx"}, 7),
    c.ClearPolicy("k14", "/", "ttl"),
    c.EnableFeatureFlag("k15", "credit_api_v2"),
    c.AddMember("k16", "n1", "0.1.0", ("credit_api_v2", "warren_metadata_raft_v1")),
    c.RemoveMember("k17", "n1"),
    c.Fence(),
    c.Bootstrap("k18", "/", "the default", "guest", "pbkdf2-sha256$1$00$00", ("administrator",)),
    c.SetQueueReplicas("k19", "/", "q", ("n1", "n2")),
    c.StreamElect("k19s", "/", "s", 3, "n2", ("n1", "n2", "n3")),
    c.SetLimit("k20", "vhost", "/", "max-connections", -1),
    c.ClearLimit("k21", "user", "guest", "max-connections"),
    c.SetOperatorPolicy("k22", "/", "cap", "^q", "queues", {"max-length": UInt(5)}, 1),
    c.ClearOperatorPolicy("k23", "/", "cap"),
    c.SetTopicPermissions("k24", "guest", "/", "amq.topic", "^eu\\.", ".*"),
    c.ClearTopicPermissions("k25", "guest", "/", "amq.topic"),
    c.SetVHostDeletionProtection("k26", "/", True),
    c.DeclareQueueByUser("k27", "/", "q", "classic", True, False, None, TYPED, "n1", (), "guest"),
    c.SetParameter("k1d", "/", "shovel", "s1", "{\"ack-mode\": \"on-confirm\"}"),
    c.ClearParameter("k1e", "/", "shovel", "s1"),
]


def test_every_command_has_a_sample():
    assert {type(s) for s in SAMPLES} == set(c.COMMANDS)


@pytest.mark.parametrize("cmd", SAMPLES, ids=lambda s: type(s).__name__)
def test_roundtrip(cmd):
    data = records.encode(cmd)
    back = records.decode(data)
    assert type(back) is type(cmd) and back == cmd
    assert records.encode(back) == data
    kind = _KINDS_OF_RENAMED.get(type(cmd), (_snake(type(cmd).__name__), 1))
    assert records.kind_of(cmd) == ("metadata." + kind[0], kind[1])
    assert c.check_fields(back) is None


# Classes renamed after their records were defined keep the kind on the wire;
# a later version of a command is a class of its own.
_KINDS_OF_RENAMED = {c.Fence: ("noop", 1), c.AddVHostWithQueueType: ("add_vhost", 2),
                     c.DeclareQueueByUser: ("declare_queue", 2)}  # fmt: skip


def _snake(name: str) -> str:
    out = "".join("_" + ch.lower() if ch.isupper() else ch for ch in name).lstrip("_")
    return out.replace("v_host", "vhost")


def test_arguments_keep_their_amqp_types():
    cmd = c.DeclareQueue("k", "/", "q", arguments=TYPED, leader="n1")
    back = records.decode(records.encode(cmd)).arguments_map
    assert back == TYPED
    for key, value in TYPED.items():
        assert type(back[key]) is type(value), key
    assert type(next(k for k in back if k == "x-sym")) is Symbol
    assert type(back["x-list"][0]) is UByte and type(back["x-map"]["nested"]) is Timestamp
    policy = records.decode(records.encode(SAMPLES[14]))
    assert type(policy.definition_map["message-ttl"]) is UInt


def test_packing_is_deterministic_and_accepts_bytes():
    a = c.Bind("k", "/", "x", "queue", "q", "", {"a": 1, "b": UInt(2)})
    b = c.Bind("k", "/", "x", "queue", "q", "", {"a": 1, "b": UInt(2)})
    assert a == b and a.arguments == c.pack({"a": 1, "b": UInt(2)})
    assert c.Bind("k", "/", "x", "queue", "q", "", a.arguments) == a
    assert c.DeclareExchange("k", "/", "x").arguments_map == {}


def test_sequences_become_tuples():
    cmd = c.AddMember("k", "n1", "0.1.0", ["b", "a"])
    assert cmd.supported_flags == ("b", "a")
    assert c.DeclareQueue("k", "/", "q", replicas=["n1"]).replicas == ("n1",)


def test_unpack_refuses_what_is_not_a_map_of_strings():
    for bad in (b"", b"\xff", c.pack({})[:-1], records.codec.dumps([1]), records.codec.dumps({1: 2})):
        with pytest.raises(ValueError):
            c.unpack(bad)
    with pytest.raises(TypeError):
        c.pack([("a", 1)])


def test_check_fields_names_the_bad_field():
    assert c.check_fields(c.DeclareQueue("k", "/", "q", durable="yes")) is not None  # type: ignore[arg-type]
    assert "priority" in c.check_fields(c.SetPolicy("k", "/", "p", ".*", priority=True))  # type: ignore[arg-type]
    assert "replicas" in c.check_fields(c.DeclareQueue("k", "/", "q", replicas=(1,)))  # type: ignore[arg-type]
    assert c.check_fields(c.DeclareQueue("k", "/", "q", exclusive_owner=None)) is None
    assert c.check_fields(c.DeclareQueue("k", "/", "q", exclusive_owner=3)) is not None  # type: ignore[arg-type]
    assert c.check_fields(c.Fence(5)) is not None  # type: ignore[arg-type]


def test_a_log_entry_of_the_wrong_shape_decodes_and_is_reported():
    # A record built by other code: arguments as a list, tags as a string.
    data = records.codec.dumps(
        ["metadata.declare_queue", 1, "k", "/", "q", "classic", True, False, None, [1], "n1", []]
    )
    cmd = records.decode(data)
    assert "arguments" in c.check_fields(cmd)
    data = records.codec.dumps(["metadata.add_vhost", 1, "k", "/", "", "tag"])
    assert "tags" in c.check_fields(records.decode(data))
