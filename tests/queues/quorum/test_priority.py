"""Two-level message priority in the quorum queue machine (RabbitMQ 4):
header priority above 4 is high, served two for each normal one while both
wait; returned messages first; only the version-2 Publish reads priorities;
snapshots keep the high list and the turn."""

from __future__ import annotations

from qq_helpers import Q

from queues.quorum import Publish, PublishPrioritised, Purge, Return, Tick, msg_id, overview
from queues.quorum.snapshot import restore, snapshot_bytes


def payload(body: str, priority: int | None) -> bytes:
    header = b"" if priority is None else b"\x00\x53\x70\xc0\x04\x02\x40\x50" + bytes([priority])
    return header + b"\x00\x53\x77\xa1" + bytes([len(body)]) + body.encode()


def publish(q: Q, *messages: tuple[str, int | None], record=PublishPrioritised, ttl: int | None = None) -> list[int]:
    batch = tuple([payload(b, p), True, ttl, "", ["q"], i, None] for i, (b, p) in enumerate(messages))
    q.do(record(batch, q.now))
    return [msg_id(q.state.last_index, i) for i in range(len(messages))]


def test_high_is_served_two_for_one_normal_and_normal_is_never_starved():
    q = Q()
    normal = publish(q, *[(f"n{i}", None if i % 2 else 4) for i in range(4)])  # none and 4: normal
    high = publish(q, *[(f"h{i}", 5 + i) for i in range(6)])  # 5..10: high
    assert overview(q.state)["ready"] == 10 and len(q.state.ready_high) == 6
    q.attach("c", credit=100)
    assert q.delivered_ids("c") == [high[0], high[1], normal[0], high[2], high[3], normal[1], high[4], high[5],
                                    normal[2], normal[3]]  # fmt: skip


def test_returned_messages_go_first_whatever_their_priority():
    q = Q()
    normal = publish(q, ("n0", None))
    q.attach("c", credit=1)
    assert q.delivered_ids("c") == normal
    high = publish(q, ("h0", 9), ("h1", 9))
    q.do(Return("c", tuple(normal)))  # credit spent: nothing goes out yet
    q.credit("c", 3)
    assert q.delivered_ids("c") == [normal[0], *high]


def test_a_version_1_publish_reads_no_priority():
    q = Q()
    ids = publish(q, ("a", 9), ("b", None), record=Publish)
    assert len(q.state.ready_high) == 0
    q.attach("c", credit=2)
    assert q.delivered_ids("c") == ids


def test_snapshots_keep_the_high_list_and_the_turn():
    q = Q()
    publish(q, ("n0", 0), ("n1", 0))
    publish(q, *[(f"h{i}", 7) for i in range(3)])
    q.attach("c", credit=1)  # one high out: the turn is 1
    assert q.state.prio_turn == 1
    copy = restore(snapshot_bytes(q.state))
    assert copy == q.state and len(copy.ready_high) == 2 and copy.prio_turn == 1
    q.credit("c", 4)
    first = q.delivered_ids("c")
    other = Q()
    other.state = copy
    other.credit("c", 4)
    assert other.delivered_ids("c") == first  # the same order from the copy


def test_purge_and_expiry_cover_the_high_list():
    q = Q()
    publish(q, ("h0", 9), ttl=100)
    publish(q, ("n0", None))
    q.now += 200
    q.do(Tick(q.now))
    assert overview(q.state)["ready"] == 1 and not q.state.ready_high  # the high head expired first
    publish(q, ("h1", 9))
    q.do(Purge())
    assert overview(q.state)["ready"] == 0 and not q.state.ready_high and not q.state.ready
