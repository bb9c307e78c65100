"""Connection-level limits over real sockets: the idle timeout and
heartbeats in both directions [2.4.5], channel-max [2.7.1], handle-max
[2.7.2] and max-message-size [2.7.3].

The misbehaving clients run Warren's own engine in the client role
(raw_client.RawClient): it can stay silent, advertise an idle timeout without
ever sending a heartbeat, and write frames proton would never write."""

from __future__ import annotations

import pytest
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container
from proton.utils import BlockingConnection, LinkDetached

from amqp import definitions as d
from amqp import events as ev
from amqp.errors import Condition
from amqp.message import Message as WireMessage

# ---------------------------------------------------------------- idle timeout


def test_a_silent_client_is_closed_after_the_idle_timeout(broker_factory, raw_clients):
    b = broker_factory(idle_timeout=1.0)
    client = raw_clients(b)
    remote_open = client.connect()
    # [2.4.5] the broker advertises half the threshold it enforces, as RabbitMQ does
    assert remote_open.idle_time_out == 500
    error, waited = client.wait_closed(timeout=10)  # and we never send anything again
    assert error.condition == Condition.RESOURCE_LIMIT_EXCEEDED
    assert 0.8 <= waited <= 5.0
    client.wait_eof()
    assert client.heartbeats() == 0  # we asked for none


class HeartbeatingClient(MessagingHandler):
    """Stays connected, idle, for `idle_for` seconds (proton sends
    heartbeats as the broker's idle-time-out asks), then proves the
    connection still works by sending itself a message."""

    def __init__(self, url: str, idle_for: float):
        super().__init__()
        self.url, self.idle_for = url, idle_for
        self.errors: list[str] = []
        self.received: list[str] = []
        self.remote_idle_timeout = None

    def on_start(self, event):
        self.container = event.container
        self.conn = event.container.connect(self.url)
        self.receiver = event.container.create_receiver(self.conn, "/queues/hb")
        self.watchdog = event.container.schedule(self.idle_for + 10, self)

    def on_connection_opened(self, event):
        self.remote_idle_timeout = event.connection.transport.remote_idle_timeout
        event.container.schedule(self.idle_for, _Callback(self.after_idle))

    def after_idle(self):
        self.sender = self.container.create_sender(self.conn, "/queues/hb")

    def on_sendable(self, event):
        if not self.received and event.sender.credit and not getattr(self, "sent", False):
            self.sent = True
            event.sender.send(Message(body="still here"))

    def on_message(self, event):
        self.received.append(event.message.body)
        self.watchdog.cancel()
        event.connection.close()

    def on_timer_task(self, event):  # the watchdog
        self.errors.append("timed out")
        event.container.stop()

    def on_transport_error(self, event):
        self.errors.append(f"transport: {event.transport.condition}")

    def on_connection_error(self, event):
        self.errors.append(f"connection: {event.connection.remote_condition}")


class _Callback:
    def __init__(self, fn):
        self.fn = fn

    def on_timer_task(self, event):
        self.fn()


def test_a_client_sending_heartbeats_outlives_the_idle_timeout(broker_factory):
    b = broker_factory(idle_timeout=1.0)
    b.declare_queue("hb")
    client = HeartbeatingClient(b.url, idle_for=2.0)  # twice the threshold
    Container(client).run()
    assert client.remote_idle_timeout == 0.5  # half the broker's 1 s threshold
    assert client.errors == []
    assert client.received == ["still here"]


def test_the_broker_sends_heartbeats_when_the_client_asks(broker, raw_clients):
    client = raw_clients(broker, idle_timeout=1.0)  # we advertise 1 s (RabbitMQ's minimum), then go quiet
    client.connect()
    assert broker.config.idle_timeout == 60.0  # the broker will not close us meanwhile
    took = client.wait_heartbeats(3, timeout=10)
    # [2.4.5] at about half our timeout: three need some 1.5 s, never a burst
    assert 1.0 <= took <= 5.0
    assert not any(type(e) is ev.ConnectionClosed for e in client.events)
    # the connection still works after the heartbeats
    session = client.begin()
    assert session.remote_begun


# ---------------------------------------------------------------- channel-max, handle-max


def test_a_session_above_channel_max_closes_with_framing_error(broker_factory, raw_clients):
    b = broker_factory(channel_max=3)
    client = raw_clients(b)
    assert client.connect().channel_max == 3
    sessions = [client.begin() for _ in range(4)]  # channels 0..3 are allowed
    assert [s.channel for s in sessions] == [0, 1, 2, 3]
    client.send_frame(4, d.Begin(next_outgoing_id=0, incoming_window=100, outgoing_window=100))
    error, _ = client.wait_closed()
    assert error.condition == Condition.FRAMING_ERROR
    assert "channel-max" in error.description
    client.wait_eof()


def test_a_link_above_handle_max_closes_with_framing_error(broker_factory, raw_clients):
    b = broker_factory(handle_max=3)
    b.declare_queue("q")
    client = raw_clients(b)
    client.connect()
    session = client.begin()
    assert session.remote_handle_max == 3
    links = [client.receiver(session, "/queues/q", name=f"l{i}") for i in range(4)]  # handles 0..3
    assert [link.handle for link in links] == [0, 1, 2, 3]
    client.send_frame(session.channel, d.Attach(name="l4", handle=4, role=d.RECEIVER,
                                                source=d.Source(address="/queues/q"), target=d.Target()))  # fmt: skip
    error, _ = client.wait_closed()
    assert error.condition == Condition.FRAMING_ERROR
    assert "handle-max" in error.description
    client.wait_eof()


# ---------------------------------------------------------------- max-message-size


def test_max_message_size_is_advertised_and_enforced(broker_factory, raw_clients):
    b = broker_factory(max_message_size=1000, max_frame_size=512)  # messages span several frames
    b.declare_queue("small")
    client = raw_clients(b)
    client.connect()
    session = client.begin()
    link = client.sender(session, "/queues/small")
    attach = next(e.attach for e in client.events if type(e) is ev.LinkAttached and e.link is link)
    assert attach.max_message_size == 1000
    exact = WireMessage.build(body=b"x" * 992).payload
    assert len(exact) == 1000
    delivery = client.send(link, exact)
    client.wait_for(lambda e: type(e) is ev.DeliveriesUpdated and delivery in e.deliveries)
    assert type(delivery.state) is d.Accepted
    too_big = WireMessage.build(body=b"x" * 993).payload  # one byte over
    client.send(link, too_big)
    detached = client.wait_event(ev.LinkDetached, link=link)
    assert detached.error.condition == Condition.MESSAGE_SIZE_EXCEEDED
    # the link is gone, the session and connection live on
    again = client.sender(session, "/queues/small", name="snd2")
    big = WireMessage.build(body=b"y" * 5000).payload  # refused as soon as the frames add up to too much
    client.send(again, big)
    detached = client.wait_event(ev.LinkDetached, link=again)
    assert detached.error.condition == Condition.MESSAGE_SIZE_EXCEEDED
    assert b.call(lambda: b.queue("small").message_count) == 1

    # python-qpid-proton sees the limit on its sender link and the same refusal
    conn = BlockingConnection(b.url, timeout=10)
    s = conn.create_sender("/queues/small")
    assert s.link.remote_max_message_size == 1000
    with pytest.raises(LinkDetached, match="message-size-exceeded"):
        s.send(Message(body="z" * 5000))
    assert b.call(lambda: b.queue("small").message_count) == 1
    conn.close()


def test_a_message_above_the_consumers_max_message_size_detaches_its_link(broker, raw_clients):
    """RabbitMQ applies [2.7.3] to what it sends as well: a consumer whose
    max-message-size a message exceeds gets a link error, and the message
    stays in the queue for others."""
    broker.declare_queue("q")
    client = raw_clients(broker)
    client.connect()
    session = client.begin()
    sender = client.sender(session, "/queues/q")
    big, small = WireMessage.build(body=b"b" * 2000).payload, WireMessage.build(body=b"s").payload
    for payload in (big, small):
        delivery = client.send(sender, payload)
        client.wait_for(lambda e, dl=delivery: type(e) is ev.DeliveriesUpdated and dl in e.deliveries)
    picky = client.receiver(session, "/queues/q", credit=2, name="picky", max_message_size=1000)
    detached = client.wait_event(ev.LinkDetached, link=picky)
    assert detached.remote  # the broker's DETACH, not our engine refusing a transfer
    assert detached.error.condition == Condition.MESSAGE_SIZE_EXCEEDED
    assert client.deliveries == []  # nothing was sent on it
    assert broker.call(lambda: (broker.queue("q").message_count, broker.queue("q").consumer_count)) == (2, 0)
    roomy = client.receiver(session, "/queues/q", credit=2, name="roomy")
    got = [WireMessage.from_bytes(x.payload) for x in client.receive(2)]
    assert [m.body for m in got] == [b"b" * 2000, b"s"]
    assert roomy.active
