"""The opening of a connection [2.4.1]: the protocol headers [2.2], the SASL
exchange [5.3] and the OPEN frames.

`Connection` owns the state (its `phase`, `sasl_done`, `header_sent`) and
hands its headers and SASL frames to its `Handshake`, which moves that state
through the public interface below. Kept apart from the connection because
it is a protocol of its own, done once per connection: the connection class
is about frames, channels and closing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import definitions as d
from .errors import AMQPError, Condition, LocalProtocolError
from .events import ConnectionClosed, ConnectionOpened, SaslInitReceived, SaslMechanismsReceived, SaslOutcomeReceived
from .framing import AMQP_HEADER, FRAME_SASL, MIN_MAX_FRAME_SIZE, SASL_HEADER, Frame, ProtocolHeader

if TYPE_CHECKING:
    from .connection import Connection

SERVER, CLIENT = "server", "client"

# Where the connection is in its opening sequence [2.4.1], [5.3.1].
HDR = "await-header"
SASL = "sasl"
AMQP = "amqp"  # headers exchanged, frames flow
DONE = "done"  # closed, or a fatal error: input is ignored


class Handshake:
    """One connection's opening: headers, SASL, OPEN."""

    def __init__(self, connection: Connection):
        self.connection = connection
        # Client: the server must answer with the SASL header (start(sasl=True))
        self.sasl_expected = False

    def accepted_headers(self) -> set[bytes]:
        """Server: the headers a client may open with now."""
        conn = self.connection
        accepted = set()
        if not conn.sasl_done:
            accepted.add(SASL_HEADER)
        if conn.sasl_done or not conn.require_sasl:
            accepted.add(AMQP_HEADER)
        return accepted

    def expected_header(self) -> bytes:
        """Server: the header to answer one we cannot read with [2.2]."""
        return SASL_HEADER if SASL_HEADER in self.accepted_headers() else AMQP_HEADER

    def start(self, sasl: bool) -> None:
        """Client: sends the first protocol header."""
        conn = self.connection
        self.sasl_expected = sasl
        conn.out.append(SASL_HEADER if sasl else AMQP_HEADER)
        conn.header_sent = True

    def on_header(self, header: ProtocolHeader, events: list) -> None:
        conn = self.connection
        raw = header.raw
        if conn.role == SERVER:
            if raw not in self.accepted_headers():
                # [2.2] answer with the header we do support, then hang up
                conn.out.append(self.expected_header())
                conn.phase = DONE
                events.append(ConnectionClosed(
                    d.Error(condition=Condition.NOT_ALLOWED, description=f"unsupported protocol header {raw!r}"),
                    remote=False,
                ))  # fmt: skip
                return
            conn.out.append(raw)
            conn.header_sent = True
            if raw == SASL_HEADER:
                conn.phase = SASL
                conn.send_frame(0, d.SaslMechanisms(sasl_server_mechanisms=conn.sasl_mechanisms), type_=FRAME_SASL)
            else:
                conn.phase = AMQP
            return
        expected = SASL_HEADER if self.sasl_expected and not conn.sasl_done else AMQP_HEADER
        if raw != expected:
            conn.phase = DONE
            events.append(ConnectionClosed(
                d.Error(condition=Condition.NOT_ALLOWED, description=f"server answered with header {raw!r}"),
                remote=False,
            ))  # fmt: skip
            return
        conn.phase = SASL if raw == SASL_HEADER else AMQP

    def on_sasl(self, frame: Frame, events: list) -> None:
        conn = self.connection
        p = frame.performative
        if frame.type != FRAME_SASL or p is None:
            raise AMQPError(Condition.FRAMING_ERROR, "expected a SASL frame")
        kind = type(p)
        if conn.role == SERVER:
            if kind is not d.SaslInit and kind is not d.SaslResponse:
                raise AMQPError(Condition.NOT_ALLOWED, f"unexpected {kind.__name__} from a SASL client")
            if kind is d.SaslInit:
                events.append(SaslInitReceived(p.mechanism, p.initial_response, p.hostname))
                conn.input_paused = True  # until the application gives the outcome
            return
        if kind is d.SaslMechanisms:
            events.append(SaslMechanismsReceived(list(p.sasl_server_mechanisms)))
        elif kind is d.SaslOutcome:
            events.append(SaslOutcomeReceived(p.code))
            if p.code == d.SASL_OK:
                self._sasl_succeeded()
                conn.out.append(AMQP_HEADER)
            else:
                conn.phase = DONE
        elif kind is not d.SaslChallenge:
            raise AMQPError(Condition.NOT_ALLOWED, f"unexpected {kind.__name__} from a SASL server")

    def sasl_outcome(self, ok: bool, code: int | None) -> None:
        """Server: answers the client's SASL init. A failed outcome ends the
        connection: there is nothing more to say on it [5.3.2]."""
        conn = self.connection
        if code is None:
            code = d.SASL_OK if ok else d.SASL_AUTH
        conn.send_frame(0, d.SaslOutcome(code=code), type_=FRAME_SASL)
        conn.input_paused = False
        conn.input_pending = ok and conn.parser.buffered > 0
        if ok:
            self._sasl_succeeded()
        else:
            conn.phase = DONE

    def open(self, hostname: str | None, properties: dict | None, offered_capabilities: list | None,
             desired_capabilities: list | None) -> None:  # fmt: skip
        conn = self.connection
        if conn.open_sent:
            if conn.close_sent or conn.phase == DONE:
                return  # we already failed the connection while reading; the event may be stale
            raise LocalProtocolError("connection already opened")
        conn.open_sent = True
        conn.send_frame(
            0,
            d.Open(
                container_id=conn.container_id,
                hostname=hostname,
                max_frame_size=conn.max_frame_size,
                channel_max=conn.channel_max,
                # [2.4.5] advertise half the threshold we enforce, so a peer that
                # heartbeats at the advertised period is never cut off
                idle_time_out=int(conn.idle_timeout * 500) if conn.idle_timeout else None,
                offered_capabilities=offered_capabilities,
                desired_capabilities=desired_capabilities,
                properties=properties,
            ),
        )

    def on_open(self, p: Any, events: list) -> None:
        if p.max_frame_size < MIN_MAX_FRAME_SIZE:
            raise AMQPError(Condition.INVALID_FIELD, f"max-frame-size {p.max_frame_size} is below 512")
        conn = self.connection
        conn.open_received = True
        conn.remote_open = p
        conn.remote_max_frame_size = p.max_frame_size
        conn.remote_channel_max = p.channel_max
        conn.remote_idle_timeout = p.idle_time_out / 1000 if p.idle_time_out else None
        events.append(ConnectionOpened(p))

    def _sasl_succeeded(self) -> None:
        """[5.3.2] both sides start over with the AMQP header."""
        conn = self.connection
        conn.sasl_done = True
        conn.phase = HDR
        conn.parser.expect_header = True
