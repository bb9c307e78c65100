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
