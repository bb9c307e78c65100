"""A client that writes its SASL init, the AMQP header and OPEN in one go
[5.3.2] must be served without sending anything more: the server engine
pauses at the SASL init for the application's outcome, and then says that
the bytes behind it wait to be processed (`input_pending`)."""

from __future__ import annotations

from amqp import definitions as d
from amqp import events as ev
from amqp.connection import SERVER, Connection
from amqp.framing import AMQP_HEADER, FRAME_SASL, SASL_HEADER, encode_frame


def _pipelined_login() -> bytes:
    init = encode_frame(0, d.SaslInit(mechanism="ANONYMOUS", initial_response=b"x"), type_=FRAME_SASL)
    return SASL_HEADER + init + AMQP_HEADER + encode_frame(0, d.Open(container_id="pipelining-client"))


def test_bytes_pipelined_behind_the_sasl_init_are_pending_after_the_outcome():
    server = Connection(SERVER, container_id="server")
    events = server.receive_data(_pipelined_login())
    assert [type(e) for e in events] == [ev.SaslInitReceived]
    assert not server.input_pending  # paused: the outcome is not given yet
    server.sasl_outcome(True)
    assert server.input_pending
    events = server.receive_data(b"")
    assert [type(e) for e in events] == [ev.ConnectionOpened]
    assert events[0].open.container_id == "pipelining-client"
    assert not server.input_pending


def test_nothing_is_pending_after_a_refused_outcome_or_without_pipelined_bytes():
    refused = Connection(SERVER)
    refused.receive_data(_pipelined_login())
    refused.sasl_outcome(False)
    assert not refused.input_pending and refused.closed

    plain = Connection(SERVER)
    init = encode_frame(0, d.SaslInit(mechanism="ANONYMOUS"), type_=FRAME_SASL)
    plain.receive_data(SASL_HEADER + init)
    plain.sasl_outcome(True)
    assert not plain.input_pending

