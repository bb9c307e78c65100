"""A client that opens sessions and links without end: at most `session_max`
sessions per connection (RabbitMQ 4's session_max_per_connection, 64 by
default) and `handle_max` + 1 links per session, however the frames arrive."""

from __future__ import annotations

import pytest
from raw_client import RawClient

from amqp import definitions as d
from amqp.errors import Condition
from amqp.framing import encode_frame


@pytest.fixture
def raw_clients():
    clients: list[RawClient] = []

    def make(broker, **kw) -> RawClient:
        c = RawClient(broker.port, **kw)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


def _begin() -> d.Begin:
    return d.Begin(next_outgoing_id=0, incoming_window=100, outgoing_window=100)


def test_a_connection_holds_at_most_session_max_sessions(broker, raw_clients):
    assert broker.config.session_max == 64  # RabbitMQ 4's default
    client = raw_clients(broker)
    # as RabbitMQ: channel-max is session_max - 1, so channels 0..63 [2.7.1]
    assert client.connect().channel_max == 63
    sessions = [client.begin() for _ in range(64)]
    assert sessions[-1].channel == 63
    client.send_frame(64, _begin())  # the 65th session
    error, _ = client.wait_closed()
    assert error.condition == Condition.FRAMING_ERROR
    client.wait_eof()
    assert broker.call(lambda: len(broker.broker.connections)) == 0


def test_session_max_is_a_setting(broker_factory, raw_clients):
    b = broker_factory(session_max=2)
    client = raw_clients(b)
    assert client.connect().channel_max == 1
    client.begin()
    client.begin()
    client.send_frame(2, _begin())
    error, _ = client.wait_closed()
    assert error.condition == Condition.FRAMING_ERROR


def test_attaches_pipelined_behind_their_begin_meet_handle_max(broker, raw_clients):
    broker.declare_queue("q")
    client = raw_clients(broker)
    client.connect()
    # BEGIN and 300 ATTACHes in one write: the broker reads them all before it
    # answers the BEGIN, and handle-max (255) holds for them all the same
    wire = encode_frame(0, _begin()) + b"".join(
        encode_frame(0, d.Attach(name=f"l{h}", handle=h, role=d.RECEIVER, source=d.Source(address="/queues/q"),
                                 target=d.Target()))  # fmt: skip
        for h in range(300)
    )
    client.sock.sendall(wire)
    error, _ = client.wait_closed()
    assert error.condition == Condition.FRAMING_ERROR
    assert "handle-max" in error.description
    client.wait_eof()
    assert broker.call(lambda: broker.queue("q").consumer_count) == 0
