"""The quorum machine's version: carried by every snapshot, a newer one
refused; and the snapshots of earlier builds still restore."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
from qq_helpers import Q

from queues.quorum import (
    MACHINE_VERSION,
    Confirm,
    Outcome,
    Publish,
    Return,
    SnapshotFormatError,
    StoreBodies,
    checked_out,
    msg_id,
    overview,
    restore,
    snapshot_bytes,
)
from queues.quorum.snapshot import SNAPSHOT_FORMAT

# Written by QuorumQueue.snapshot() at 65de699, before the publish dedup tables
# moved into the machine: [1, publishers, format 1 machine snapshot]. Three
# batches from two publishers (n1#1/1 seqs 1 and 3, n2#7/4 seq 1), a consumer
# n1#1/9 given 2 credits, one of its messages modified back (delivery failed,
# an annotation merged).
OLD_QUEUE_SNAPSHOT = Path(__file__).parent / "fixtures" / "queue_snapshot_v0.bin"


def publish(seq: int, publisher: str = "n1#1/1", n: int = 1) -> Publish:
    return Publish(tuple((b"m", True, None, "", ("q",), i, None) for i in range(n)), 2000, publisher, seq)


def with_version(data: bytes, version: int) -> bytes:
    return data[:6] + struct.pack("<H", version) + data[8:]


def test_snapshots_carry_the_machine_version():
    q = Q()
    q.publish(3)
    data = snapshot_bytes(q.state)
    # format 4: SNAPSHOT_FORMAT (5) only once a consumer is stamped (test_consumer_timeout.py)
    assert struct.unpack_from("<4sHH", data) == (b"WQQS", 4, MACHINE_VERSION)
    assert restore(data).machine_version == MACHINE_VERSION


def test_a_snapshot_of_a_newer_machine_is_refused_with_a_clear_error():
    q = Q()
    q.publish(3)
    data = with_version(snapshot_bytes(q.state), MACHINE_VERSION + 1)
    with pytest.raises(SnapshotFormatError, match=f"machine version {MACHINE_VERSION + 1} is newer than this build's"):
        restore(data)
    with pytest.raises(SnapshotFormatError, match="machine version 0"):
        restore(with_version(snapshot_bytes(q.state), 0))


def test_a_snapshot_of_a_newer_layout_is_refused():
    data = snapshot_bytes(Q().state)
    with pytest.raises(SnapshotFormatError, match=f"format {SNAPSHOT_FORMAT + 1} is not known"):
        restore(data[:4] + struct.pack("<H", SNAPSHOT_FORMAT + 1) + data[6:])


def format_2_snapshot(state) -> bytes:
    """What snapshot_bytes wrote before the ready messages were runs: every
    message section, the ready one too, as columns of 12+ B per message."""
    from amqp import codec
    from queues.quorum import snapshot as snap

    data = snapshot_bytes(state)
    meta_len = struct.unpack_from("<I", data, 12)[0]
    meta = codec.dumps(codec.loads(data[16 : 16 + meta_len])[:8])  # without format 4's prio_turn
    meta_len = len(meta)
    parts = [meta]
    snap._pack_msgs(parts, sorted(state.returned))
    snap._pack_msgs(parts, list(state.ready))
    for cs in state.consumers.values():
        snap._pack_msgs(parts, list(cs.checked.values()))
    dlx = list(state.dlx.values())
    snap._pack_msgs(parts, [m for m, _ in dlx], [r for _, r in dlx])
    live = state.live.key()
    parts.append(struct.pack("<I", len(live)))
    parts.append(struct.pack(f"<{len(live)}Q", *(i for i, _ in live)))
    parts.append(struct.pack(f"<{len(live)}I", *(n for _, n in live)))
    body = b"".join(parts)
    assert codec.loads(parts[0])  # the meta is unchanged
    return struct.pack("<4sHHII", b"WQQS", 2, state.machine_version, zlib.crc32(body), meta_len) + body


def a_queue_in_every_place() -> Q:
    q = Q({"x-message-ttl": 60000})
    q.publish(5)
    q.publish(3, ttl=10)
    q.attach("c", credit=2)
    q.do(Return("c", (msg_id(1, 0),)))
    q.publish(2)
    return q


def test_a_format_2_snapshot_restores_into_ready_runs():
    q = a_queue_in_every_place()
    state = restore(format_2_snapshot(q.state))
    assert state == q.state and state.ready.key() == q.state.ready.key()
    assert snapshot_bytes(state) == snapshot_bytes(q.state)
    assert len(format_2_snapshot(q.state)) > len(snapshot_bytes(q.state))


def test_a_format_1_machine_snapshot_restores_as_machine_version_1():
    q = Q()
    q.publish(2)
    q.attach("c", credit=1)
    data = format_2_snapshot(q.state)
    # format 1: the same sections behind a header without the machine version,
    # and a meta value without the publishers
    from amqp import codec

    meta_len = struct.unpack_from("<I", data, 12)[0]
    meta = codec.loads(data[16 : 16 + meta_len])
    old_meta = codec.dumps(meta[:7])
    body = old_meta + data[16 + meta_len :]
    old = struct.pack("<4sHII", b"WQQS", 1, zlib.crc32(body), len(old_meta)) + body
    state = restore(old)
    assert state == q.state and state.machine_version == 1 and state.publishers == {}


def test_a_queue_snapshot_written_before_the_machine_held_the_dedup_tables_restores():
    state = restore(OLD_QUEUE_SNAPSHOT.read_bytes())
    assert state.machine_version == 1
    ov = overview(state)
    assert (ov["depth"], ov["ready"], ov["checked_out"], ov["ready_bytes"], ov["last_index"]) == (6, 5, 1, 20, 6)
    assert ov["counters"]["returned"] == 1 and ov["counters"]["delivered"] == 2
    (held,) = checked_out(state, "n1#1/9")
    assert state.consumers["n1#1/9"].checked[held][5] is None
    modified = next(m for m in state.returned if m[0] == msg_id(1, 0))
    assert modified[3] == 1 and modified[5] == {"x-opt-note": "hi"}  # delivery failed once, annotation merged
    ps = state.publishers["n1#1/1"]
    assert (ps.low, ps.above) == (1, {3}) and state.publishers["n2#7/4"].low == 1
    # the dedup tables came along: batches applied before are answered, not applied again
    q = Q()
    q.state = state
    assert q.do(publish(3, n=2)) == [Confirm((0, 1), Outcome.ACCEPTED)]
    assert q.do(publish(1, "n2#7/4")) == [Confirm((0,), Outcome.ACCEPTED)]
    assert q.do(publish(2))[0] == StoreBodies(q.state.last_index, 1)
    assert overview(q.state)["ready"] == 6
    # and it is written again in today's format
    data = snapshot_bytes(q.state)
    assert data[:4] == b"WQQS" and restore(data) == q.state


def test_bytes_that_are_no_snapshot_at_all_are_refused():
    for data in (b"", b"\x00\x01", b"not a snapshot", OLD_QUEUE_SNAPSHOT.read_bytes()[:-5]):
        with pytest.raises(SnapshotFormatError):
            restore(data)
