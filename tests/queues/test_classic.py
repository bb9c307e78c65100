"""ClassicQueue as a pure core: publishing and confirms, delivery and link
credit [2.6.7] (FIFO, round robin, consumer priority, drain, echo, a lagging
receiver, delivery-count wrap-around), and a stateful property that the queue
never sends beyond the credit a receiver granted. The fakes are in
classic_fakes.py; settlement is in test_classic_settlement.py, TTL and length
limits in test_classic_limits.py, self-deletion and management in
test_classic_lifecycle.py."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from amqp import serial
from queues.base import ACCEPT, RELEASE, Outcome, Settlement
from queues.classic import MAX_CREDIT

from .classic_fakes import FakeConsumer, FakeHost, RecordingPersistence, fill, grant, make, msg

# ---------------------------------------------------------------- publish and confirm


def test_transient_publish_confirms_at_once_and_counts():
    q = make()
    assert fill(q, 3) == [Outcome.ACCEPTED] * 3
    assert q.message_count == 3 and q.ready_bytes == 6 and q.unacked_count == 0
    assert q.stats.published == 3 and q.stats.confirmed == 3
    assert q.info()["message_count"] == 3 and q.info()["type"] == "classic"


def test_durable_message_confirms_only_after_persistence_says_durable():
    p = RecordingPersistence()
    q = make(durable=True, persistence=p)
    outcomes: list[Outcome] = []
    q.publish(msg("a", durable=True), outcomes.append)
    q.publish(msg("b", durable=False), outcomes.append)  # transient: not stored, confirmed now
    assert outcomes == [Outcome.ACCEPTED]
    assert p.writes == [("put", 0)]
    p.commit()
    assert outcomes == [Outcome.ACCEPTED, Outcome.ACCEPTED]
    assert q.stats.confirmed == 2


def test_non_durable_queue_never_writes_durable_messages():
    p = RecordingPersistence()
    q = make(durable=False, persistence=p)
    assert fill(q, 2, durable=True) == [Outcome.ACCEPTED] * 2
    assert p.writes == []


def test_presettled_publish_is_stored_and_enqueued():
    p = RecordingPersistence()
    q = make(durable=True, persistence=p)
    q.publish(msg("a", durable=True), None)
    assert q.message_count == 1 and p.writes == [("put", 0)] and p.waiting == []


def test_publish_assigns_increasing_seqs():
    q = make()
    messages = [msg(str(i)) for i in range(3)]
    for m in messages:
        m.seq = 99
        q.publish(m, None)
    assert [m.seq for m in messages] == [0, 1, 2]


# ---------------------------------------------------------------- delivery and credit


def test_fifo_and_never_beyond_credit():
    q = make()
    fill(q, 10)
    c = FakeConsumer()
    q.attach_consumer(c)
    assert c.got == []  # no credit yet
    grant(q, c, 3)
    assert c.bodies == [b"m0", b"m1", b"m2"]
    assert q.link_state(c) == (3, 0, False)
    assert q.message_count == 7 and q.unacked_count == 3
    grant(q, c, 2)
    assert c.bodies[3:] == [b"m3", b"m4"]
    assert c.first_acquirer == [True] * 5


def test_new_messages_go_to_consumers_with_credit():
    q = make()
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 2)
    fill(q, 3)
    assert c.bodies == [b"m0", b"m1"] and q.message_count == 1


def test_round_robin_among_consumers_with_credit():
    q = make()
    cs = [FakeConsumer() for _ in range(3)]
    for c in cs:
        q.attach_consumer(c)
        grant(q, c, 10)
    fill(q, 9)
    assert [c.seqs for c in cs] == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]


def test_round_robin_is_fair_across_publishes_and_skips_consumers_without_credit():
    q = make()
    a, b = FakeConsumer(), FakeConsumer()
    q.attach_consumer(a)
    q.attach_consumer(b)
    grant(q, a, 1)
    grant(q, b, 5)
    fill(q, 4)
    assert a.seqs == [0] and b.seqs == [1, 2, 3]


def test_backlog_is_shared_round_robin_when_credit_arrives():
    q = make()
    fill(q, 6)
    a, b = FakeConsumer(), FakeConsumer()
    q.attach_consumer(a)
    q.attach_consumer(b)
    grant(q, a, 2)
    grant(q, b, 2)
    assert a.seqs == [0, 1] and b.seqs == [2, 3]
    grant(q, a, 1)
    grant(q, b, 1)
    assert a.seqs == [0, 1, 4] and b.seqs == [2, 3, 5]


def test_consumer_priority_wins_while_it_has_credit():
    q = make()
    low, high = FakeConsumer(), FakeConsumer()
    q.attach_consumer(low, priority=0)
    q.attach_consumer(high, priority=5)
    grant(q, low, 10)
    grant(q, high, 2)
    fill(q, 5)
    assert high.seqs == [0, 1] and low.seqs == [2, 3, 4]
    grant(q, high, 1)
    fill(q, 1)
    assert high.seqs == [0, 1, 5]


def test_effective_credit_accounts_for_a_lagging_receiver():
    # [2.6.7] credit = delivery_count_rcv + link_credit - delivery_count_snd
    q = make()
    fill(q, 20)
    c = FakeConsumer()
    q.attach_consumer(c)
    q.credit(c, 0, 5, False, False)
    assert len(c.got) == 5
    # The receiver had seen only 2 of those 5 when it granted 4 more: 2 + 4 - 5 = 1.
    q.credit(c, 2, 4, False, True)
    assert len(c.got) == 6
    assert c.replies == [(6, 0, 14, False)]
    # Lagging more than the new credit: nothing, never a negative credit.
    q.credit(c, 0, 3, False, True)
    assert len(c.got) == 6 and c.replies[-1] == (6, 0, 14, False)


def test_credit_can_be_revoked():
    q = make()
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 5)
    grant(q, c, 0)
    fill(q, 2)
    assert c.got == [] and q.message_count == 2


def test_echo_reply_carries_state_after_delivery():
    q = make()
    fill(q, 3)
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 10, echo=True)
    assert c.replies == [(3, 7, 0, False)]
    grant(q, c, 7)  # no echo, no drain: no reply
    assert len(c.replies) == 1


def test_drain_on_empty_queue_advances_delivery_count():
    q = make()
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 10, drain=True)
    assert c.replies == [(10, 0, 0, True)]
    assert q.link_state(c) == (10, 0, True)
    fill(q, 1)  # no credit left
    assert c.got == []


def test_drain_delivers_what_there_is_then_uses_up_the_rest():
    q = make()
    fill(q, 3)
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 5, drain=True)
    assert c.seqs == [0, 1, 2]
    assert c.replies == [(5, 0, 0, True)]


def test_drain_with_more_messages_than_credit_replies_with_remaining_available():
    q = make()
    fill(q, 5)
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 2, drain=True)
    assert c.seqs == [0, 1]
    assert c.replies == [(2, 0, 3, True)]


def test_drain_then_regrant_then_credit_one():
    q = make()
    c = FakeConsumer()
    q.attach_consumer(c)
    grant(q, c, 4, drain=True)
    assert c.replies[-1] == (4, 0, 0, True)
    fill(q, 3)
    grant(q, c, 1)
    assert c.seqs == [0]
    grant(q, c, 1)
    assert c.seqs == [0, 1]
    grant(q, c, 5, drain=True, echo=True)
    assert c.seqs == [0, 1, 2]
    assert c.replies[-1] == (4 + 2 + 5, 0, 0, True)  # one reply, not two
    assert len(c.replies) == 2


def test_delivery_count_wraps_at_2_32():
    q = make()
    c = FakeConsumer()
    start = serial.MASK - 2  # 2^32 - 3
    q.attach_consumer(c, delivery_count=start)
    fill(q, 10)
    q.credit(c, start, 5, False, True)
    assert c.seqs == [0, 1, 2, 3, 4]
    assert c.replies == [(2, 0, 5, False)]  # 2^32 - 3 + 5 wraps to 2
    # The receiver, lagging from before the wrap, grants 6 more: 2^32-3 + 6 - 2 = 1.
    q.credit(c, start, 6, False, False)
    assert c.seqs == [0, 1, 2, 3, 4, 5]
    q.credit(c, 3, 100, True, False)  # drain across no wrap: 3 + 100
    assert c.replies[-1] == (103, 0, 0, True)


def test_drain_wraps_delivery_count():
    q = make()
    c = FakeConsumer()
    q.attach_consumer(c, delivery_count=serial.MASK)
    q.credit(c, serial.MASK, 10, True, False)
    assert c.replies == [(9, 0, 0, True)]


def test_huge_link_credit_is_capped():
    q = make()
    c = FakeConsumer()
    q.attach_consumer(c)
    q.credit(c, 0, serial.MASK, False, True)
    assert c.replies == [(0, MAX_CREDIT, 0, False)]
    fill(q, 3)
    assert len(c.got) == 3


def test_credit_reply_reentering_credit_is_safe():
    q = make()
    fill(q, 5)
    c = FakeConsumer()
    q.attach_consumer(c)
    calls = []

    def again():
        if not calls:
            calls.append(1)
            grant(q, c, 2, echo=True)

    c.on_reply = again
    grant(q, c, 1, echo=True)
    assert c.seqs == [0, 1, 2]
    assert c.replies == [(1, 0, 4, False), (3, 0, 2, False)]


def test_drain_requested_inside_deliver_completes_after_the_outer_dispatch():
    q = make()
    fill(q, 3)
    c = FakeConsumer()
    q.attach_consumer(c)

    def first(queue, m):
        c.on_deliver = None
        grant(queue, c, 5, drain=True)  # re-enters while the queue is dispatching

    c.on_deliver = first
    grant(q, c, 1)
    assert c.seqs == [0, 1, 2]
    assert c.replies == [(6, 0, 0, True)]
    assert q.link_state(c) == (6, 0, True)


def test_drain_of_one_consumer_leaves_the_other_alone():
    q = make()
    a, b = FakeConsumer(), FakeConsumer()
    q.attach_consumer(a)
    q.attach_consumer(b)
    grant(q, b, 3)
    grant(q, a, 3, drain=True)
    assert a.replies == [(3, 0, 0, True)] and b.replies == []
    fill(q, 2)
    assert a.got == [] and b.seqs == [0, 1]


# ---------------------------------------------------------------- property: never beyond credit


class CreditMachine(RuleBasedStateMachine):
    """Two consumer links, each with a receiver that sees transfers late: its
    FLOWs carry the delivery-count it has seen so far. For every FLOW the
    queue processes, what it sends afterwards must stay within
    delivery_count_rcv + link_credit [2.6.7], and its replies must agree."""

    @initialize(start=st.sampled_from([0, serial.HALF - 3, serial.MASK - 4]), presettled=st.booleans())
    def setup(self, start, presettled):
        self.host = FakeHost()
        self.q = make(self.host)
        self.links = []
        for _ in range(2):
            link = {"c": FakeConsumer(presettled=presettled), "wire": [], "seen": start, "sent": start,
                    "limit": start, "flow_sent": start}  # fmt: skip
            self._hook(link)
            self.q.attach_consumer(link["c"], delivery_count=start)
            self.links.append(link)

    def _hook(self, link):
        c = link["c"]

        def deliver(queue, m):
            link["sent"] = serial.add(link["sent"], 1)
            assert serial.le(link["sent"], link["limit"]), "delivered beyond credit"
            link["wire"].append(("transfer", m.seq))

        def reply():
            dc, credit, available, drain = c.replies[-1]
            assert credit >= 0 and available == self.q.message_count
            before, limit = link["flow_sent"], link["limit"]
            granted = serial.le(before, limit)
            if drain:
                assert credit == 0
                assert dc == (limit if granted else link["sent"])
            else:
                assert dc == link["sent"]
                assert serial.add(dc, credit) == limit if granted else credit == 0
            link["sent"] = dc
            link["wire"].append(("flow", dc))

        c.on_deliver = deliver
        c.on_reply = reply

    @rule(n=st.integers(1, 5))
    def publish(self, n):
        fill(self.q, n)

    @rule(i=st.integers(0, 1), k=st.integers(0, 8))
    def receive(self, i, k):
        link = self.links[i]
        for _ in range(min(k, len(link["wire"]))):
            kind, value = link["wire"].pop(0)
            link["seen"] = serial.add(link["seen"], 1) if kind == "transfer" else value

    @rule(i=st.integers(0, 1), credit=st.sampled_from([0, 1, 1, 2, 3, 5, 10, 100]), drain=st.booleans(),
          echo=st.booleans())  # fmt: skip
    def flow(self, i, credit, drain, echo):
        link = self.links[i]
        link["limit"] = serial.add(link["seen"], credit)
        link["flow_sent"] = link["sent"]
        self.q.credit(link["c"], link["seen"], credit, drain, echo)
        if drain:
            assert link["c"].replies, "drain must be answered"

    @precondition(lambda self: not self.links[0]["c"].presettled)
    @rule(i=st.integers(0, 1), kind=st.sampled_from(["accept", "release", "fail"]), data=st.data())
    def settle(self, i, kind, data):
        c = self.links[i]["c"]
        held = sorted(self.q._flow.consumers[id(c)].unacked)
        if not held:
            return
        seqs = data.draw(st.lists(st.sampled_from(held), max_size=4, unique=True))
        settlement = {"accept": ACCEPT, "release": RELEASE, "fail": Settlement("modified", True)}[kind]
        self.q.settle(c, seqs, settlement)

    @invariant()
    def queue_state_matches_the_links(self):
        if not hasattr(self, "q"):
            return
        for link in self.links:
            dc, credit, _ = self.q.link_state(link["c"])
            assert dc == link["sent"]
            assert 0 <= credit
            assert serial.le(serial.add(dc, credit), link["limit"]) or credit == 0
        # Nothing idles while somebody has credit.
        if any(self.q.link_state(link["c"])[1] for link in self.links):
            assert self.q.message_count == 0

    @invariant()
    def fifo_per_consumer_for_fresh_messages(self):
        if not hasattr(self, "q"):
            return
        for link in self.links:
            fresh = [m.seq for m, first in zip(link["c"].got, link["c"].first_acquirer, strict=True) if first]
            assert fresh == sorted(fresh)


TestCredit = CreditMachine.TestCase
TestCredit.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
