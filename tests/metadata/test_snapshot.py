"""Snapshots of the metadata state, and the Raft-facing MetadataMachine."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from metadata_helpers import ALL_FLAGS, cluster, k, run

from amqp import codec
from amqp.types import Symbol, UInt
from metadata import commands as c
from metadata import snapshot
from metadata.effects import CREATED, OK, Error
from metadata.machine import MetadataMachine, apply
from metadata.snapshot import SnapshotFormatError, decode_state, encode_state
from metadata.state import MetadataState, VHostRecord


def busy_state() -> MetadataState:
    """Fixed keys: the same commands in every process."""
    return run(
        MetadataState(),
        c.AddMember("m1", "n1", "0.1.0", ALL_FLAGS),
        c.AddMember("m2", "n2", "0.1.0", ALL_FLAGS),
        c.AddVHost("v1", "/"),
        c.AddVHost("v2", "v2"),
        c.PutUser("u1", "alice", "hash", ("administrator",)),
        c.SetPermissions("p1", "alice", "/", "^a", "", ".*"),
        c.DeclareExchange("x1", "/", "topics", "topic", arguments={"alternate-exchange": "ae", "n": UInt(1)}),
        c.DeclareExchange("x2", "/", "ae", "fanout", auto_delete=True),
        c.DeclareQueue("q1", "/", "orders", arguments={Symbol("x-max-length"): UInt(10)}, leader="n1"),
        c.DeclareQueue("q2", "/", "excl", exclusive_owner="n2/c1", durable=False, leader="n2", replicas=("n2",)),
        c.Bind("b1", "/", "topics", "queue", "orders", "a.#"),
        c.Bind("b2", "/", "amq.headers", "queue", "orders", "", {"x-match": "any", "h": UInt(1)}),
        c.Bind("b3", "/", "ae", "queue", "excl"),
        c.Bind("b4", "/", "topics", "exchange", "ae", "#"),
        c.SetPolicy("pol", "v2", "ttl", "^q", "queues", {"message-ttl": UInt(5)}, 2),
        c.EnableFeatureFlag("ff", "credit_api_v2"),
        c.EnableFeatureFlag("ff2", "operator_policies"),
        c.SetOperatorPolicy("opol", "/", "cap", "^o", "quorum_queues", {"max-length": UInt(100)}, 0),
        c.EnableFeatureFlag("ff3", "topic_permissions"),
        c.SetTopicPermissions("tp", "alice", "/", "topics", "^a\\.", ".*"),
    )


def test_roundtrip_is_exact():
    state = busy_state()
    data = encode_state(state)
    back = decode_state(data)
    assert back == state
    assert encode_state(back) == data
    args = back.queue("/", "orders").arguments_map
    assert type(next(iter(args))) is Symbol and type(args["x-max-length"]) is UInt
    # The remembered keys survive: a retried command is still answered from memory.
    assert apply(back, c.DeclareQueue("q1", "/", "orders", arguments={Symbol("x-max-length"): UInt(10)},
                                      leader="n1"))[1] == CREATED  # fmt: skip


def test_a_vhost_without_operator_policies_is_written_as_before_they_existed():
    state = run(cluster("/"), c.SetPolicy(k(), "/", "p", ".*", definition={"max-length": 1}))
    value = codec.loads(encode_state(state))
    assert len(value) == 11 and [len(v) for v in value[4]] == [5]  # no topic permissions, no operator policies
    assert decode_state(encode_state(state)) == state


def test_restored_state_keeps_producing_identical_snapshots():
    state = busy_state()
    more = [c.DeclareQueue(k(), "/", f"q{i}", leader="n1") for i in range(50)]
    more += [c.Bind(k(), "/", "amq.direct", "queue", f"q{i}", str(i % 7)) for i in range(50)]
    more += [c.DeleteQueue(k(), "/", f"q{i}") for i in range(0, 50, 3)]
    live = run(state, *more)
    restored = run(decode_state(encode_state(state)), *more)
    assert encode_state(restored) == encode_state(live)


def test_same_commands_give_identical_snapshots_whatever_the_hash_seed(tmp_path: Path):
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); import test_snapshot as t; "
        "from metadata.snapshot import encode_state; sys.stdout.write(encode_state(t.busy_state()).hex())"
    )
    here = str(Path(__file__).parent)
    outputs = set()
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", script, here], env=env, capture_output=True, text=True,
                             cwd=Path(__file__).parents[2], check=True)  # fmt: skip
        outputs.add(out.stdout)
    assert len(outputs) == 1 and bytes.fromhex(outputs.pop()) == encode_state(busy_state())


def test_refuses_what_it_cannot_read():
    data = encode_state(busy_state())
    value = codec.loads(data)
    for bad in (
        b"",
        b"\xff",
        codec.dumps(["something else", 1]),
        codec.dumps([snapshot.MAGIC, 2, 1, 10]),  # a newer layout
        codec.dumps([snapshot.MAGIC, 1, 99, 10]),  # a newer machine
        codec.dumps(value[:10]),  # an element short
        codec.dumps(value + [[]] * (16 - len(value))),  # past the last optional element
        codec.dumps(value[:4] + [[["junk"]]] + value[5:]),
    ):
        with pytest.raises(SnapshotFormatError):
            decode_state(bad)
    # A record from a newer release.
    newer = value[:4] + [[[[4, "/", "", [], "", False, 0], [], [], [], []]]] + value[5:]
    with pytest.raises(SnapshotFormatError, match="newer"):
        decode_state(codec.dumps(newer))


def test_old_record_formats_are_migrated(monkeypatch):
    value = codec.loads(encode_state(MetadataState()))
    value[4] = [[[0, "legacy"], [], [], [], []]]  # format 0 had only the name
    data = codec.dumps(value)
    with pytest.raises(SnapshotFormatError, match="no migration"):
        decode_state(data)
    monkeypatch.setitem(snapshot.MIGRATIONS, (VHostRecord, 0), lambda fields: [fields[0], "migrated", []])
    state = decode_state(data)
    assert state.vhost("legacy").record == VHostRecord("legacy", "migrated", ())


# -- MetadataMachine ---------------------------------------------------------------


def test_machine_applies_and_tells_its_listeners():
    seen = []
    m = MetadataMachine(on_applied=lambda *args: seen.append(args))
    cmd = c.AddVHost("k1", "/")
    assert m.apply(cmd, 7) == CREATED
    assert m.last_index == 7 and m.state.vhost("/") is not None
    [(command, result, effects, index)] = seen
    assert command is cmd and result == CREATED and index == 7 and len(effects) == 1
    assert m.apply(cmd, 8) == CREATED  # a retry: the first result, no effects
    assert seen[-1][2] == () and seen[-1][3] == 8
    assert m.apply(c.Fence(), 9) == OK


def test_a_failing_listener_does_not_fail_the_apply(caplog):
    calls = []

    def bad(*args):
        raise RuntimeError("listener bug")

    m = MetadataMachine(on_applied=bad)
    m.subscribe(on_applied=lambda *args: calls.append(args[3]))
    with caplog.at_level(logging.ERROR):
        assert m.apply(c.AddVHost("k", "/"), 1) == CREATED
    assert calls == [1] and "listener" in caplog.text


def test_machine_snapshot_and_restore():
    source = MetadataMachine(busy_state())
    restored = []
    target = MetadataMachine(on_restored=restored.append)
    target.restore(source.snapshot())
    assert target.state == source.state and restored == [target.state]
    assert target.snapshot() == source.snapshot()
    before = target.state
    with pytest.raises(SnapshotFormatError):
        target.restore(b"garbage")
    assert target.state is before


def test_machine_answers_bad_records_with_errors():
    m = MetadataMachine(cluster("/"))
    result = m.apply(c.DeclareQueue("k", "/", "q", durable="no"), 1)
    assert isinstance(result, Error)
    assert isinstance(m.apply("not a record", 2), Error)
