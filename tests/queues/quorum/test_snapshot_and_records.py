"""Snapshots, command records and the queue-argument parser."""

from __future__ import annotations

import struct
import time

import pytest
from qq_helpers import Q

from queues.quorum import (
    COMMANDS,
    Attach,
    Credit,
    DeadLetterSettled,
    Detach,
    Discard,
    DownConsumersOnNode,
    Enqueue,
    Modify,
    MsgIn,
    Publish,
    PublishBatch,
    PublishPrioritised,
    Purge,
    QueueArgumentError,
    QuorumConfig,
    Return,
    SetConfig,
    Settle,
    SnapshotFormatError,
    Tick,
    TickClock,
    TickTimeouts,
    apply,
    checked_out,
    new_state,
    overview,
    release_cursor,
    restore,
    snapshot_bytes,
)
from queues.quorum.snapshot import SNAPSHOT_FORMAT
from raft import records

# ---------------------------------------------------------------- records


SAMPLES = [
    Enqueue((MsgIn(10, None, "a"), MsgIn(20, 5, ("pub", 7)), MsgIn(0, 0, None)), 1700000000000),
    Attach(("conn", 3, "link"), 2, 5, "rabbit@n1", 4294967295, True),
    Detach("c"),
    Credit("c", None, 100, True, False),
    Credit(7, 4294967000, 0),
    Settle("c", (1, 2, 3)),
    Return("c", ()),
    Discard("c", (1 << 40,)),
    Modify("c", (5,), True, False, {"x-opt-reason": "bad", "x-opt-n": 3}),
    Modify("c", (5,), False, True, None),
    Tick(123),
    TickTimeouts(123, 30_000),
    TickClock(123, 30_000),
    Purge(),
    DownConsumersOnNode("rabbit@n2"),
    DeadLetterSettled((9, 10)),
    SetConfig((5, True, "at-least-once", 1000, 10, None, "reject-publish", False)),
    Publish(((b"body", True, None, "", ("q",), 0, None), (b"", False, 5, "x", ("a", "b"), None, {"x-opt-k": 1})),
            1700000000000, "n1#1/1", 3),  # fmt: skip
    PublishPrioritised(((b"\x00\x53\x70\xc0\x04\x02\x40\x50\x07", True, None, "", ("q",), 0, None),),
                       1700000000000, "n1#1/1", 5),  # fmt: skip
    PublishBatch.of([(b"body", True, None, "", ("q",), 0, None), (b"", False, 5, "x", ("a", "b"), None, {"x-opt-k": 1}),
                     (bytes(range(256)) * 4, True, 0, "amq.topic", (), 1 << 19, None)],
                    1700000000000, "n1#1/1", 4),  # fmt: skip
]


def test_every_command_kind_has_a_sample():
    assert {type(s) for s in SAMPLES} == set(COMMANDS)


@pytest.mark.parametrize("command", SAMPLES, ids=lambda c: type(c).__name__)
def test_commands_round_trip_through_records(command):
    kind, version = records.kind_of(command)
    assert kind.startswith("quorum.") and version == {PublishBatch: 3, PublishPrioritised: 2, TickTimeouts: 2, TickClock: 3}.get(type(command), 1)
    decoded = records.decode(records.encode(command))
    assert decoded == command and type(decoded) is type(command)


def test_decoded_commands_apply_like_the_originals():
    st1, st2 = new_state({"x-dead-letter-exchange": ""}), new_state({"x-dead-letter-exchange": ""})
    cmds = [
        Attach("c", 0, 1),
        Credit("c", 0, 5),
        Enqueue((MsgIn(3, None, "a"), MsgIn(4, 10, "b")), 1000),
        Modify("c", (1 << 20 | 1,), True, False, {"x-opt-k": "v"}),
        Discard("c", (3 << 20,)),
        Publish(((b"abc", True, 10, "", ("q",), 0, {"x-opt-k": 2}), (b"de", False, None, "", ("q",), None, None)),
                1001, "p", 1),  # fmt: skip
        Publish(((b"abc", True, 10, "", ("q",), 0, None),), 1002, "p", 1),  # a duplicate
        PublishBatch.of([(b"fgh", True, 10, "", ("q",), 0, {"x-opt-k": 2}), (b"ij", False, None, "", ("q",), None, None)],
                        1003, "p", 2),  # fmt: skip
        PublishBatch.of([(b"fgh", True, 10, "", ("q",), 0, None)], 1004, "p", 2),  # a duplicate
    ]
    for i, cmd in enumerate(cmds, start=1):
        st1, fx1 = apply(cmd, st1, i)
        st2, fx2 = apply(records.decode(records.encode(cmd)), st2, i)
        assert fx1 == fx2
    assert st1 == st2


# ---------------------------------------------------------------- config


def test_config_defaults_and_parsing():
    cfg = QuorumConfig.from_arguments({})
    assert cfg == QuorumConfig()
    assert cfg.delivery_limit == 20 and not cfg.dead_letter and cfg.overflow == "drop-head"
    cfg = QuorumConfig.from_arguments({
        "x-delivery-limit": -1, "x-dead-letter-exchange": "", "x-dead-letter-strategy": "at-least-once",
        "x-message-ttl": 5, "x-max-length": 3, "x-max-length-bytes": 100, "x-overflow": "reject-publish",
        "x-single-active-consumer": True, "x-queue-type": "quorum",
    })  # fmt: skip
    assert cfg.delivery_limit is None and cfg.dead_letter and cfg.at_least_once
    assert (cfg.message_ttl, cfg.max_length, cfg.max_length_bytes) == (5, 3, 100)
    assert cfg.single_active_consumer


@pytest.mark.parametrize(
    "arguments",
    [
        {"x-overflow": "reject-publish-dlx"},
        {"x-overflow": "nope"},
        {"x-delivery-limit": -2},
        {"x-delivery-limit": "5"},
        {"x-delivery-limit": True},
        {"x-dead-letter-exchange": 5},
        {"x-dead-letter-strategy": "sometimes"},
        {"x-message-ttl": -1},
        {"x-max-length": 1.5},
        {"x-max-length-bytes": -5},
        {"x-single-active-consumer": "yes"},
    ],
)
def test_config_refuses_bad_arguments(arguments):
    with pytest.raises(QueueArgumentError):
        QuorumConfig.from_arguments(arguments)


# ---------------------------------------------------------------- snapshots


def _busy_queue() -> Q:
    q = Q({"x-dead-letter-exchange": "dlx", "x-dead-letter-strategy": "at-least-once",
           "x-overflow": "reject-publish", "x-max-length": 1000, "x-message-ttl": 60000})  # fmt: skip
    q.attach(("conn", 1), credit=3, priority=2, node="n1")
    q.attach(("conn", 2), credit=2, priority=2, node="n2")
    q.attach("low", credit=0, settled=True)
    ids = q.publish(10, size=33)
    q.publish(2, ttl=5)
    q.do(Modify(("conn", 1), (ids[0],), True, False, {"x-opt-why": "retry"}))
    q.do(Discard(("conn", 2), (ids[1],)))
    q.do(Return(("conn", 1), (ids[3],)))
    q.credit("low", 1)
    q.do(Settle(("conn", 1), (ids[2],)))
    return q


def test_snapshot_round_trip_is_equal_and_byte_identical():
    q = _busy_queue()
    data = snapshot_bytes(q.state)
    st = restore(data)
    assert st == q.state
    assert snapshot_bytes(st) == data
    assert overview(st) == overview(q.state)
    assert release_cursor(st) == release_cursor(q.state)
    assert checked_out(st, ("conn", 1)) == checked_out(q.state, ("conn", 1))
    # and both go on identically
    q2 = Q()
    q2.state = st
    for qq in (q, q2):
        qq.do(Detach(("conn", 1)))
        qq.credit(("conn", 2), 10)
        qq.do(Tick(10**9))
    assert q.fx == q2.fx and q.state == q2.state


def test_a_clock_kept_by_ticks_survives_a_snapshot_and_only_then_needs_format_6():
    q = _busy_queue()
    data = snapshot_bytes(q.state)
    assert struct.unpack_from("<H", data, 4)[0] == 4 and not restore(data).tick_clock  # what 0.2 members read
    q.do(TickClock(500, 0))
    data = snapshot_bytes(q.state)
    st = restore(data)
    assert struct.unpack_from("<H", data, 4)[0] == SNAPSHOT_FORMAT == 6
    assert st == q.state and st.tick_clock and st.clock == 500 and snapshot_bytes(st) == data
    q2 = Q()
    q2.state = st
    for qq in (q, q2):  # a publish stamped later moves neither clock
        qq.now = 10**9
        qq.publish(1)
    assert q.state == q2.state and q2.state.clock == 500


def test_snapshot_of_an_empty_state():
    st = new_state()
    data = snapshot_bytes(st)
    assert restore(data) == st and len(data) < 200


def test_snapshot_is_versioned_and_checked():
    data = snapshot_bytes(_busy_queue().state)
    with pytest.raises(SnapshotFormatError):
        restore(b"XXXX" + data[4:])
    with pytest.raises(SnapshotFormatError):
        restore(data[:4] + struct.pack("<H", SNAPSHOT_FORMAT + 1) + data[6:])
    with pytest.raises(SnapshotFormatError):
        restore(data[:-1] + bytes([data[-1] ^ 1]))  # crc
    with pytest.raises(SnapshotFormatError):
        restore(data[:5])
    # a truncated body with a matching crc
    import zlib

    body = data[16:-3]
    with pytest.raises(SnapshotFormatError):
        restore(data[:8] + struct.pack("<I", zlib.crc32(body)) + data[12:16] + body)


def test_snapshot_size_for_plain_messages_is_12_bytes_each():
    q = Q()
    q.publish(1000)
    assert len(snapshot_bytes(q.state)) < 1000 * 12 + 300


@pytest.mark.slow
def test_snapshot_of_a_million_messages():
    st = new_state()
    msgs = tuple(MsgIn(100, None, None) for _ in range(1000))
    for i in range(1, 1001):
        st, _ = apply(Enqueue(msgs, 0), st, i)
    st, _ = apply(Attach("c"), st)
    st, _ = apply(Credit("c", 0, 300_000), st)
    t0 = time.perf_counter()
    data = snapshot_bytes(st)
    t1 = time.perf_counter()
    st2 = restore(data)
    t2 = time.perf_counter()
    assert st2 == st
    print(f"1M refs: {len(data)} bytes, snapshot {1e3 * (t1 - t0):.0f} ms, restore {1e3 * (t2 - t1):.0f} ms")
    assert len(data) < 13_000_000
    assert t1 - t0 < 5 and t2 - t1 < 5


def test_set_config_changes_the_limits_at_once_and_survives_a_snapshot():
    state = new_state({})
    state, _ = apply(Enqueue(tuple(MsgIn(10, None, None) for _ in range(5)), 1000), state)
    assert overview(state)["ready"] == 5
    capped = QuorumConfig.from_arguments({"x-max-length": 2, "x-delivery-limit": 3})
    state, effects = apply(SetConfig(tuple(capped.as_list())), state)
    assert state.config == capped and overview(state)["ready"] == 2
    assert restore(snapshot_bytes(state)).config == capped
    same, effects = apply(SetConfig((1, 2)), state)  # a layout this machine does not know: ignored
    assert same.config == capped and effects == []
