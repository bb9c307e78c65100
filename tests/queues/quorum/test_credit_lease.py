"""A follower's credit lease (queues/quorum/credit_lease.py) on one replica
without Raft: the test applies the records the replica proposes, in order, as
its group would commit them, and sees what the link was sent and when."""

from __future__ import annotations

from replica_host import batch, make

from queues import quorum as qq
from queues.base import Settlement


class Link:
    """A consumer link attached through this replica's node, as a strict client sees it."""

    def __init__(self, presettled: bool = False):
        self.presettled = presettled
        self.got: list[bytes] = []
        self.ids: list[int] = []
        self.replies: list[tuple] = []

    def deliver(self, queue, message):
        self.got.append(message.payload)
        self.ids.append(message.seq)

    def credit_reply(self, delivery_count, credit, available, drain):
        self.replies.append((delivery_count, credit, available, drain))


def follower(lease: int = 1000, messages: int = 10, presettled: bool = False):
    queue, host = make()
    host.leader, host.lease = False, lease
    queue.apply(batch(messages, 1), 1)
    link = Link(presettled)
    queue.attach_consumer(link)
    return queue, host, link


def commit(queue, host) -> list:
    """Apply what the replica proposed since the last call (its consumer pipeline's order)."""
    records = [r for r, _ in host.proposed]
    host.proposed.clear()
    for record in records:
        queue.apply(record, queue.state.last_index + 1)
    return records


def test_a_follower_asks_for_its_credit_again_and_sends_the_client_only_its_credit():
    queue, host, link = follower()
    queue.credit(link, 0, 3, False, False)
    records = commit(queue, host)
    assert [r.credit for r in records if isinstance(r, qq.Credit)] == [6]
    assert link.got == [b"m0", b"m1", b"m2"]  # the other 3 are held for it
    assert queue.unacked_count == 6 and queue.message_count == 4
    # the next grant is served at once, before its Credit is committed
    queue.credit(link, 3, 2, False, False)
    assert link.got == [b"m0", b"m1", b"m2", b"m3", b"m4"]
    commit(queue, host)  # limit 5 + a lease of 2: m5 still held, m6 taken from the queue
    assert link.got[-1] == b"m4" and queue.unacked_count == 7


def test_lowering_the_credit_holds_what_the_machine_decided_under_the_old_one():
    queue, host, link = follower()
    queue.credit(link, 0, 4, False, False)
    queue.credit(link, 0, 1, False, False)  # the client changed its mind before the first committed
    commit(queue, host)
    assert link.got == [b"m0"]  # never more than it granted last
    queue.credit(link, 1, 3, False, True)
    assert link.got == [b"m0", b"m1", b"m2", b"m3"]
    commit(queue, host)
    assert link.replies[-1] == (4, 0, queue.message_count + 4, False)  # its own delivery-count; the 4 held are available


def test_a_drain_takes_what_is_held_then_ends_at_the_clients_limit():
    queue, host, link = follower(messages=5)
    queue.credit(link, 0, 3, False, False)
    commit(queue, host)
    assert len(link.got) == 3  # m3, m4 held: the queue has no ready message left
    queue.credit(link, 3, 10, True, False)
    assert len(link.got) == 5
    records = commit(queue, host)
    assert [r.credit for r in records if isinstance(r, qq.Credit)] == [10]  # a drain leases nothing
    assert link.replies == [(13, 0, 0, True)]  # 3 + 10: not the machine's count of what it handed out
    assert queue.state.consumers[next(iter(queue.state.consumers))].delivery_count == 13


def test_detaching_returns_the_held_messages_with_the_sent_ones():
    queue, host, link = follower()
    queue.credit(link, 0, 4, False, False)
    commit(queue, host)
    assert len(link.got) == 4 and queue.unacked_count == 8
    queue.settle(link, link.ids[:2], Settlement("accepted"))
    queue.detach_consumer(link)
    commit(queue, host)
    assert queue.unacked_count == 0 and queue.message_count == 8  # 2 sent unsettled + 4 held, back


def test_the_leader_a_pre_settled_consumer_and_the_setting_at_zero_lease_nothing():
    for setup in ("leader", "presettled", "off"):
        queue, host, link = follower(lease=0 if setup == "off" else 1000, presettled=setup == "presettled")
        host.leader = setup == "leader"
        queue.credit(link, 0, 3, False, False)
        records = commit(queue, host)
        assert [r.credit for r in records if isinstance(r, qq.Credit)] == [3], setup
        assert len(link.got) == 3 and queue.message_count == 7, setup


def test_a_consumer_that_declines_the_lease_gets_exactly_its_credit_on_a_follower():
    """The delayed exchanges' scheduler (leased = False): nothing is checked out beyond what it
    asked for, so nothing waits in the replica for a credit it may never grant."""
    queue, host, link = follower()
    link.leased = False
    queue.credit(link, 0, 3, False, False)
    records = commit(queue, host)
    assert [r.credit for r in records if isinstance(r, qq.Credit)] == [3]
    assert len(link.got) == 3 and queue.unacked_count == 3 and queue.message_count == 7


def test_competing_consumers_each_get_only_their_credit_and_a_detach_hands_the_held_ones_on():
    queue, host, first = follower()  # first: priority 0, attached first
    second = Link()
    queue.attach_consumer(second, priority=5)
    commit(queue, host)
    queue.credit(first, 0, 2, False, False)
    queue.credit(second, 0, 3, False, False)
    commit(queue, host)
    # the first's Credit came first: it has 2 sent and 2 held, the second 3 sent and 3 held
    assert (first.got, second.got) == ([b"m0", b"m1"], [b"m4", b"m5", b"m6"])
    assert queue.unacked_count == 10 and queue.message_count == 0
    queue.credit(second, 3, 5, False, False)  # more credit: what it holds, not the first's
    assert second.got == [b"m4", b"m5", b"m6", b"m7", b"m8", b"m9"]
    queue.detach_consumer(first)  # its 2 unsettled and 2 held go back, to the consumer with credit
    commit(queue, host)
    assert len(second.got) == 3 + 5  # never beyond what it granted: the other 2 are held for it
    queue.credit(second, 8, 10, False, False)
    assert sorted(second.got) == sorted(f"m{i}".encode() for i in range(10))  # each once, none lost


def test_a_snapshot_installed_while_holding_sends_nothing_twice_nor_beyond_the_credit():
    """The follower misses entries the leader compacted (a Credit that leased more)
    and installs the leader's snapshot: its gate is refilled from the state, in order."""
    leader, _ = make()
    queue, host, link = follower()
    leader.apply(batch(10, 1), 1)

    def commit_both() -> None:
        for record in commit(queue, host):
            leader.apply(record, leader.state.last_index + 1)

    commit_both()  # the Attach
    queue.credit(link, 0, 3, False, False)
    commit_both()
    assert link.got == [b"m0", b"m1", b"m2"]  # m3-m5 held
    queue.credit(link, 3, 2, False, False)  # served from what is held: m3, m4
    for record in [r for r, _ in host.proposed]:  # its Credit (limit 5 + lease 2) reaches the leader only
        leader.apply(record, leader.state.last_index + 1)
    host.proposed.clear()
    queue.restore(leader.snapshot())
    while host.soon:
        host.soon.pop(0)()  # the resync, at the end of the loop turn
    assert link.got == [b"m0", b"m1", b"m2", b"m3", b"m4"]  # nothing again, nothing past its limit of 5
    queue.credit(link, 5, 5, False, False)
    assert link.got[5:] == [b"m5", b"m6"]  # what the snapshot checked out to it, in order
    commit(queue, host)
    assert link.got[5:] == [b"m5", b"m6", b"m7", b"m8", b"m9"]
