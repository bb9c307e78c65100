"""Clients that open sockets and do not finish the handshake: the broker
answers what they pipelined, closes what stalls after `handshake_timeout`,
and caps how many connections a node, a vhost or a user may hold."""

from __future__ import annotations

import pytest
from hostile_clients import WireClient

from amqp import definitions as d
from amqp import events as ev
from amqp.framing import AMQP_HEADER, FRAME_SASL, SASL_HEADER, encode_frame


@pytest.fixture
def wire_clients():
    clients: list[WireClient] = []

    def make(broker) -> WireClient:
        c = WireClient(broker.port)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


def _plain_init(user: str = "guest", password: str = "guest") -> bytes:
    response = b"\0" + user.encode() + b"\0" + password.encode()
    return encode_frame(0, d.SaslInit(mechanism="PLAIN", initial_response=response), type_=FRAME_SASL)


def _open(hostname: str | None = None) -> bytes:
    return encode_frame(0, d.Open(container_id="hostile", hostname=hostname))


# ---------------------------------------------------------------- row 8: pipelined login


def test_sasl_init_amqp_header_and_open_in_one_write_are_answered(broker, wire_clients):
    client = wire_clients(broker)
    client.write(SASL_HEADER + _plain_init() + AMQP_HEADER + _open())
    outcome = client.wait_event(ev.SaslOutcomeReceived)
    assert outcome.code == d.SASL_OK
    # nothing more is written: the broker must process the OPEN it already holds
    opened = client.wait_event(ev.ConnectionOpened, timeout=5)
    assert opened.open.container_id == broker.config.node_name


# ---------------------------------------------------------------- row 1: handshake timeout

HANDSHAKE_S = 0.5


def _stalled_sockets() -> dict[str, bytes]:
    return {
        "nothing": b"",
        "three header bytes": SASL_HEADER[:3],
        "only the SASL header": SASL_HEADER,
        "logged in without OPEN": SASL_HEADER + _plain_init() + AMQP_HEADER,
        "half an OPEN": SASL_HEADER + _plain_init() + AMQP_HEADER + _open()[:10],
    }


@pytest.mark.parametrize("what", list(_stalled_sockets()))
def test_a_client_that_stalls_before_open_is_closed_after_the_handshake_timeout(broker_factory, wire_clients, what):
    b = broker_factory(handshake_timeout=HANDSHAKE_S)
    client = wire_clients(b)
    client.write(_stalled_sockets()[what])
    client.wait_eof(timeout=5)
    assert b.call(lambda: len(b.broker.connections)) == 0


def test_a_client_that_trickles_bytes_is_closed_after_the_handshake_timeout(broker_factory, wire_clients):
    b = broker_factory(handshake_timeout=HANDSHAKE_S)
    client = wire_clients(b)
    wire = SASL_HEADER + _plain_init() + AMQP_HEADER + _open()
    sent = 0
    # one byte, then wait (reading) for the broker to hang up, then the next:
    # the timeout counts from accept, not from the last byte
    while not client.eof:
        assert sent < len(wire), "the whole handshake went through"
        try:
            client.write(wire[sent : sent + 1])
        except (BrokenPipeError, ConnectionResetError):
            break
        sent += 1
        client._read(0.1)
    assert sent < len(wire)


def test_an_opened_connection_is_not_touched_by_the_handshake_timeout(broker_factory):
    from raw_client import RawClient

    b = broker_factory(handshake_timeout=HANDSHAKE_S)
    client = RawClient(b.port, idle_timeout=None)
    try:
        client.connect()
        conns = b.call(lambda: list(b.broker.connections))
        assert [c._handshake_timer for c in conns] == [None]  # cancelled at OPEN
        client.begin()
    finally:
        client.close()


def test_the_handshake_timeout_defaults_to_rabbitmqs_ten_seconds():
    from node.config import Config

    assert Config().handshake_timeout == 10.0


# ---------------------------------------------------------------- row 1: node connection limit


def refusal(client) -> d.Error:
    """The error of the CLOSE that followed the broker's OPEN (often in the same read)."""
    for e in client.events:
        if type(e) is ev.ConnectionClosed:
            return e.error
    return client.wait_closed()[0]


def test_connections_over_the_node_limit_are_refused(broker_factory):
    from raw_client import RawClient

    from amqp.errors import Condition

    b = broker_factory(max_connections=2)
    clients = []
    try:
        for _ in range(3):
            clients.append(RawClient(b.port))
            clients[-1].connect()
        third = clients[2]  # OPEN is answered, then CLOSE, as RabbitMQ does after the header exchange
        error = refusal(third)
        assert error.condition == Condition.RESOURCE_LIMIT_EXCEEDED
        assert error.description == "connection refused: node connection limit (2) is reached"
        clients[0].begin()  # the first two are served
    finally:
        for c in clients:
            c.close()
