"""Publishers during a resource alarm are held, not disconnected: their link
credit goes to zero, links and connection stay up, nothing gets an unknown
outcome, and publishing resumes when the alarm clears (RabbitMQ 4). A client
that sends past zero credit loses that link (transfer-limit-exceeded), not
its connection."""

from __future__ import annotations

import pytest
from proton import Message, Timeout
from proton.handlers import MessagingHandler
from proton.reactor import Container
from proton.utils import BlockingConnection
from raw_client import RawClient

from amqp import definitions as d
from amqp import events as ev
from amqp.errors import Condition

TOTAL = 600
ALARM_AFTER = 100


class HeldPublisher(MessagingHandler):
    """Publishes TOTAL messages as fast as credit allows; raises the alarm
    after ALARM_AFTER confirms, and clears it once the broker took the credit
    away and every message sent so far is settled."""

    def __init__(self, broker):
        super().__init__()
        self.broker = broker
        self.sent = self.accepted = self.other_outcomes = 0
        self.alarm_raised = self.alarm_cleared = False
        self.held: dict = {}
        self.errors: list = []
        self.deadline = None

    def on_start(self, event):
        self.conn = event.container.connect(self.broker.url)
        self.sender = event.container.create_sender(self.conn, "/queues/held")
        self.deadline = event.container.schedule(20, self)  # a hang fails the test, it does not stall it

    def on_timer_task(self, event):
        self.errors.append(f"deadline: sent={self.sent} accepted={self.accepted} held={self.held}")
        self.conn.close()

    def on_sendable(self, event):
        while self.sender.credit > 0 and self.sent < TOTAL:
            self.sender.send(Message(body=f"m{self.sent}"))
            self.sent += 1

    def on_link_flow(self, event):
        self._maybe_clear()

    def on_accepted(self, event):
        self.accepted += 1
        if self.accepted == ALARM_AFTER and not self.alarm_raised:
            self.alarm_raised = True
            self.broker.call(self.broker.broker.alarms.force, "memory", True)
        self._maybe_clear()
        if self.accepted == TOTAL:
            self.deadline.cancel()
            self.conn.close()

    def _maybe_clear(self):
        # held: no credit, and everything sent so far confirmed (none lost)
        if self.alarm_raised and not self.alarm_cleared and self.sender.credit <= 0 and self.accepted == self.sent:
            self.alarm_cleared = True
            self.held = {"sent": self.sent, "queued": self.broker.call(lambda: self.broker.queue("held").message_count),
                         "links": self.broker.call(lambda: self.broker.broker.metrics.links)}  # fmt: skip
            self.broker.call(self.broker.broker.alarms.force, "memory", False)

    def on_rejected(self, event):
        self.other_outcomes += 1

    def on_released(self, event):
        self.other_outcomes += 1

    def on_link_error(self, event):
        self.errors.append(("link", event.link.remote_condition))

    def on_connection_error(self, event):
        self.errors.append(("connection", event.connection.remote_condition))

    def on_transport_error(self, event):
        self.errors.append(("transport", event.transport.condition))

    def on_disconnected(self, event):
        if self.accepted < TOTAL:
            self.errors.append(("disconnected", self.accepted))


def test_an_alarm_holds_publishers_by_credit_and_they_resume_when_it_clears(broker):
    broker.declare_queue("held")
    h = HeldPublisher(broker)
    Container(h).run()
    assert h.errors == []
    assert h.alarm_cleared, "the broker never took the publisher's credit away"
    # held with its link attached, the queue holding exactly what was sent
    assert h.held["queued"] == h.held["sent"] < TOTAL
    assert h.held["links"] == 1
    assert (h.accepted, h.other_outcomes) == (TOTAL, 0)
    assert broker.queue("held").message_count == TOTAL


def test_a_publisher_that_sends_past_zero_credit_loses_its_link_not_its_connection(broker):
    broker.declare_queue("alarmed")
    broker.call(broker.broker.alarms.force, "disk", True)
    client = RawClient(broker.port)
    try:
        client.connect()
        session = client.begin()
        link = session.create_link("pushy", d.SENDER)
        link.attach(source=d.Source(), target=d.Target(address="/queues/alarmed"), snd_settle_mode=d.SND_UNSETTLED)
        client.wait_event(ev.LinkAttached, link=link)
        assert link.link_credit == 0  # attached during the alarm: no credit
        # send anyway, behind the engine's back
        client.send_frame(session.channel, d.Transfer(handle=link.handle, delivery_id=0, delivery_tag=b"t0",
                                                      message_format=0, settled=False), b"\x00\x53\x77\x40")  # fmt: skip
        detached = client.wait_event(ev.LinkDetached, link=link)
        assert detached.error.condition == Condition.TRANSFER_LIMIT_EXCEEDED
        assert broker.queue("alarmed").message_count == 0
        # the connection serves on: a consumer on another session attaches
        other = client.begin()
        client.receiver(other, "/queues/alarmed")
        assert not any(type(e) is ev.ConnectionClosed for e in client.events)
    finally:
        client.close()
        broker.call(broker.broker.alarms.force, "disk", False)


def test_a_proton_publisher_with_a_transfer_in_flight_as_the_alarm_comes_is_held(broker):
    """Found by the chaos disk-full fault: publishers went on through the alarm. The alarm's
    FLOW (link-credit 0) crosses a transfer in flight, so it counts one delivery fewer than
    Qpid Proton sent; Proton's credit goes below zero, which it takes for credit to spare, and
    it goes on sending within the old grant, which Warren takes as sent before the FLOW."""
    broker.declare_queue("windowed")
    conn = BlockingConnection(broker.url, timeout=5)
    try:
        sender = conn.create_sender("/queues/windowed")
        sender.send(Message(body="before"))
        in_flight = sender.link.send(Message(body="in flight"))  # written once the connection runs again
        broker.call(broker.broker.alarms.force, "disk", True)
        conn.wait(lambda: in_flight.settled, timeout=5, msg="the transfer in flight was not taken")
        with pytest.raises(Timeout):
            sender.send(Message(body="during"), timeout=1)
        assert broker.queue("windowed").message_count == 2
    finally:
        conn.close()
        broker.call(broker.broker.alarms.force, "disk", False)
