"""Flow control as clients see it: a strict receiver's credit is never
exceeded, a slow queue slows only its own link, and resource alarms stop
publishers while consumers go on."""

from __future__ import annotations

import struct

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container
from proton.utils import BlockingConnection
from raw_client import RawClient

from amqp import events as ev


def fill(broker, queue: str, n: int, prefix: str = "m") -> None:
    conn = BlockingConnection(broker.url, timeout=10)
    s = conn.create_sender(f"/queues/{queue}")
    for i in range(n):
        s.send(Message(body=f"{prefix}{i}"))
    conn.close()


class StrictReceiver(MessagingHandler):
    """Runs a script of credit moves and fails if the broker ever sends a
    transfer the outstanding credit does not cover."""

    def __init__(self, url: str, address: str, script: list[tuple[str, int, int]]):
        super().__init__(prefetch=0, auto_accept=True)
        self.url, self.address = url, address
        self.script = list(script)  # (move, credit, messages expected before the next move)
        self.outstanding = 0  # credit the broker may still use, as this receiver accounts it
        self.received: list[str] = []
        self.violations: list[str] = []
        self.expect = 0
        self.step: tuple | None = None
        self.drain_done: list[int] = []

    def on_start(self, event):
        conn = event.container.connect(self.url)
        self.receiver = event.container.create_receiver(conn, self.address)

    def on_link_opened(self, event):
        if event.link.is_receiver:
            self.next_step()

    def next_step(self):
        if not self.script:
            self.receiver.connection.close()
            return
        self.step = move, credit, expect = self.script.pop(0)
        self.expect = len(self.received) + expect
        self.outstanding += credit
        if move == "drain":
            self.receiver.drain(credit)
        else:
            self.receiver.flow(credit)
        if move == "publish":  # grant, then make a message arrive later
            fill_later = self.step
            self.publish_after_grant(fill_later)
        if move == "grant" and expect == 0:
            self.next_step()

    def publish_after_grant(self, step):
        sender = self.receiver.session.sender(f"pub-{len(self.received)}")
        sender.target.address = self.address
        sender.open()
        self.pending_sender = sender

    def on_sendable(self, event):
        sender = getattr(self, "pending_sender", None)
        if sender is not None and event.sender.name == sender.name:
            sender.send(Message(body="late"))
            self.pending_sender = None

    def on_settled(self, event):
        if event.link.is_sender:
            event.link.close()

    def on_message(self, event):
        self.outstanding -= 1
        if self.outstanding < 0:
            self.violations.append(f"transfer beyond credit after {len(self.received)} messages")
        self.received.append(event.message.body)
        self.maybe_advance()

    def on_link_flow(self, event):
        if event.link.is_receiver:
            self.maybe_advance()

    def maybe_advance(self):
        if self.step is None or len(self.received) < self.expect:
            return
        if self.step[0] == "drain":
            if self.receiver.credit > 0:
                return  # the broker's FLOW ending the drain has not arrived yet
            self.drain_done.append(len(self.received))
            self.outstanding = 0  # a drain hands back what the broker could not use
        self.step = None
        self.next_step()


def test_strict_receiver_never_gets_more_than_its_credit(broker):
    broker.declare_queue("credit-q")
    fill(broker, "credit-q", 30)
    script = [
        ("grant", 1, 1),
        ("grant", 1, 1),
        ("grant", 5, 5),
        ("drain", 4, 4),  # enough messages: drain delivers them all
        ("grant", 3, 3),
        ("grant", 1, 1),
        ("drain", 50, 15),  # only 15 left: the rest of the credit is used up by the drain
        ("grant", 0, 0),
        ("publish", 1, 1),  # credit 1 on an empty queue; a later message takes it
    ]
    h = StrictReceiver(broker.url, "/queues/credit-q", script)
    Container(h).run()
    assert not h.violations
    assert h.received == [f"m{i}" for i in range(30)] + ["late"]
    assert len(h.drain_done) == 2
    assert broker.queue("credit-q").message_count == 0


class TwoLinkPublisher(MessagingHandler):
    """One session, two sender links: one to a deliberately slow queue, one
    to a normal queue."""

    def __init__(self, url, per_link: int, slow_total: int):
        super().__init__()
        self.url, self.per_link, self.slow_total = url, per_link, slow_total
        self.sent = {"slow": 0, "fast": 0}
        self.accepted = {"slow": 0, "fast": 0}
        self.slow_accepted_when_fast_done = None
        self.max_slow_in_flight = 0

    def on_start(self, event):
        conn = event.container.connect(self.url)
        session = conn.session()
        session.open()
        self.links = {}
        for name in ("slow", "fast"):
            link = session.sender(name)
            link.target.address = f"/queues/{name}"
            link.open()
            self.links[name] = link

    def on_sendable(self, event):
        name = event.sender.name
        total = self.slow_total if name == "slow" else self.per_link
        while event.sender.credit and self.sent[name] < total:
            event.sender.send(Message(body=f"{name}-{self.sent[name]}", durable=True))
            self.sent[name] += 1
        in_flight = self.sent["slow"] - self.accepted["slow"]
        self.max_slow_in_flight = max(self.max_slow_in_flight, in_flight)

    def on_accepted(self, event):
        name = event.link.name
        self.accepted[name] += 1
        if name == "fast" and self.accepted["fast"] == self.per_link:
            self.slow_accepted_when_fast_done = self.accepted["slow"]
        if self.accepted["fast"] == self.per_link and self.accepted["slow"] == self.slow_total:
            event.connection.close()


class SlowConfirms:
    """Wraps a queue's persistence so its confirms arrive `delay` seconds late."""

    def __init__(self, inner, loop, delay):
        self.inner, self.loop, self.delay = inner, loop, delay

    def on_durable(self, ticket, callback, on_failed=None):
        self.inner.on_durable(ticket, lambda: self.loop.call_later(self.delay, callback))

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_slow_queue_does_not_slow_the_other_link_of_its_session(broker_factory):
    b = broker_factory(publisher_credit=100, max_unconfirmed=200)
    slow = b.declare_queue("slow", durable=True)
    b.declare_queue("fast", durable=True)
    b.call(lambda: setattr(slow, "_persistence", SlowConfirms(slow._persistence, b.loop, 2.0)))
    h = TwoLinkPublisher(b.url, per_link=2000, slow_total=400)
    Container(h).run()
    assert h.accepted == {"slow": 400, "fast": 2000}
    # the fast link finished while the slow queue had confirmed nothing yet
    assert h.slow_accepted_when_fast_done == 0
    # and the slow link was held to its unconfirmed budget plus one grant
    assert h.max_slow_in_flight <= 200 + 100


def test_credit_is_granted_from_what_the_whole_input_holds(broker_factory):
    """Credit is topped up once the input a read brought is all dispatched: a grant in the
    middle of it counted the transfers after it against the credit but not as unconfirmed,
    so a client writing 100, 50 and 100 messages was granted a third time and could have
    350 unconfirmed, past max_unconfirmed (200) plus one grant (100)."""
    b = broker_factory(publisher_credit=100, max_unconfirmed=200)
    slow = b.declare_queue("slow", durable=True)
    b.call(lambda: setattr(slow, "_persistence", SlowConfirms(slow._persistence, b.loop, 600.0)))  # never, here
    client = RawClient(b.port)
    try:
        client.connect()
        link = client.sender(client.begin(), "/queues/slow")
        sent = 0

        def write(n: int) -> int:
            """n transfers in one socket write, then the broker's answer to an echoed FLOW (it
            read them all): the credit it holds for us, its grants included."""
            nonlocal sent
            assert link.link_credit >= n
            for _ in range(n):
                sent += 1
                link.send(struct.pack(">I", sent), Message(body="x", durable=True).encode())
            client.flush()
            for _ in range(2):  # the second echo's answer follows everything the first read caused
                link.flow(echo=True)
                client.wait_for(lambda e: type(e) is ev.LinkFlow and e.link is link and e.echo is False)
            return link.link_credit

        assert write(100) == 100  # granted after 100: 100 unconfirmed
        assert write(50) == 100  # half used: granted again (150 unconfirmed)
        assert write(100) == 0  # 250 unconfirmed: no more until confirms come
        assert sent + link.link_credit <= 200 + 100
    finally:
        client.close()


def test_a_sender_that_sends_only_under_credit_is_granted_more_before_it_runs_out(broker_factory):
    """A conforming sender never sends past its credit, and some clients (RabbitMQ 3.10's
    shovel plugin among them) stop or fail when it reaches zero: the node grants again once
    half is used, so a sender writing half its credit at a time always holds the other half
    and streams without waiting for a grant."""
    b = broker_factory(publisher_credit=100)
    b.declare_queue("stream-in")
    client = RawClient(b.port)
    try:
        client.connect()
        link = client.sender(client.begin(), "/queues/stream-in")  # returns once credit came
        assert link.link_credit == 100
        sent = 0
        for _ in range(20):
            half = link.link_credit // 2
            for _ in range(half):
                sent += 1
                link.send(struct.pack(">I", sent), Message(body="x").encode())
            client.flush()
            link.flow(echo=True)  # the answer comes after the node has read the transfers before it
            # the grant: the echo's answer itself when the transfers came in an earlier read, else
            # the FLOW right behind it (the node grants once the read it came in is dispatched)
            client.wait_for(lambda e: type(e) is ev.LinkFlow and e.link is link and e.echo is False
                            and link.link_credit == 100)  # fmt: skip
            assert link.link_credit == 100, f"after {sent} messages"
        assert sent == 1000
        assert b.queue("stream-in").message_count == 1000
    finally:
        client.close()


def test_alarm_blocks_publishers_and_lets_consumers_consume(broker):
    broker.declare_queue("alarm-q")
    fill(broker, "alarm-q", 5, prefix="before")
    events = {}

    class Client(MessagingHandler):
        def __init__(self):
            super().__init__(prefetch=0)
            self.received = []
            self.sent = 0
            self.accepted = 0

        def on_start(self, event):
            conn = event.container.connect(broker.url)
            self.receiver = event.container.create_receiver(conn, "/queues/alarm-q")
            self.sender = event.container.create_sender(conn, "/queues/alarm-q")
            broker.call(broker.broker.alarms.force, "test", True)

        def on_link_opened(self, event):
            if event.link.is_sender:
                self.sender.send(Message(body="during-alarm"))
                self.sent += 1
                self.receiver.flow(5)

        def on_message(self, event):
            self.received.append(event.message.body)
            if len(self.received) == 5:
                # consumers went on; the publish made during the alarm is still held
                events["queue_depth_during_alarm"] = broker.call(lambda: broker.queue("alarm-q").message_count)
                events["accepted_during_alarm"] = self.accepted
                broker.call(broker.broker.alarms.force, "test", False)
                self.receiver.flow(1)
            if len(self.received) == 6:
                event.connection.close()

        def on_accepted(self, event):
            self.accepted += 1

    c = Client()
    Container(c).run()
    assert c.received == [f"before{i}" for i in range(5)] + ["during-alarm"]
    assert events == {"queue_depth_during_alarm": 0, "accepted_during_alarm": 0}
    assert c.accepted == 1
