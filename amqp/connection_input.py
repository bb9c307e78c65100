"""A connection's handling of what its peer sends [2.4]: protocol headers, SASL
frames [5.3], OPEN, BEGIN, CLOSE and the frames it hands to its sessions."""

from __future__ import annotations

from typing import Any

from . import definitions as d
from .errors import AMQPError, Condition, DecodeError, SessionError
from .events import (
    ConnectionClosed,
    ConnectionOpened,
    SaslInitReceived,
    SaslMechanismsReceived,
    SaslOutcomeReceived,
    SessionBegun,
    SessionEnded,
)
from .framing import (
    AMQP_HEADER,
    FRAME_AMQP,
    FRAME_SASL,
    MIN_MAX_FRAME_SIZE,
    SASL_HEADER,
    Frame,
    ProtocolHeader,
    bounded_error,
)
from .session import Session

SERVER, CLIENT = "server", "client"

# Where the connection is in its opening sequence [2.4.1], [5.3.1].
HDR = "await-header"
SASL = "sasl"
AMQP = "amqp"  # headers exchanged, frames flow
DONE = "done"  # closed, or a fatal error: input is ignored

_WITH_ERROR = frozenset({d.Close, d.End, d.Detach})
_SESSION_FRAMES = frozenset({d.Begin, d.Attach, d.Flow, d.Transfer, d.Disposition, d.Detach, d.End})


class ConnectionInput:
    """The input half of `Connection` (amqp/connection.py), which owns the state it changes."""

    def _accepted_headers(self) -> set[bytes]:
        accepted = set()
        if not self.sasl_done:
            accepted.add(SASL_HEADER)
        if self.sasl_done or not self.require_sasl:
            accepted.add(AMQP_HEADER)
        return accepted

    def _expected_header(self) -> bytes:
        return SASL_HEADER if SASL_HEADER in self._accepted_headers() else AMQP_HEADER

    def _on_header(self, header: ProtocolHeader, events: list) -> None:
        raw = header.raw
        if self.role == SERVER:
            accepted = self._accepted_headers()
            expected = self._expected_header()
            if raw not in accepted:
                # [2.2] answer with the header we do support, then hang up
                self._out.append(expected)
                self.phase = DONE
                events.append(ConnectionClosed(
                    d.Error(condition=Condition.NOT_ALLOWED, description=f"unsupported protocol header {raw!r}"),
                    remote=False,
                ))  # fmt: skip
                return
            self._out.append(raw)
            self.header_sent = True
            if raw == SASL_HEADER:
                self.phase = SASL
                mechs = d.SaslMechanisms(sasl_server_mechanisms=self.sasl_mechanisms)
                self._send_frame(0, mechs, type_=FRAME_SASL)
            else:
                self.phase = AMQP
            return
        expected = (
            SASL_HEADER if (getattr(self, "_sasl_expected", False) and not self.sasl_done) else AMQP_HEADER
        )
        if raw != expected:
            self.phase = DONE
            events.append(ConnectionClosed(
                d.Error(condition=Condition.NOT_ALLOWED, description=f"server answered with header {raw!r}"),
                remote=False,
            ))  # fmt: skip
            return
        self.phase = SASL if raw == SASL_HEADER else AMQP

    def _on_frame(self, frame: Frame, events: list) -> None:
        p = frame.performative
        if self.phase == SASL:
            self._on_sasl(frame, events)
            return
        if frame.type != FRAME_AMQP:
            raise AMQPError(Condition.FRAMING_ERROR, "SASL frame outside the SASL exchange")
        if p is None:
            return  # heartbeat [2.4.5]
        if self.close_received:
            return
        kind = type(p)
        if kind in _WITH_ERROR and p.error is not None and type(p.error) is not d.Error:
            # the field is typed `*` in the tables; [2.7.6]-[2.7.9] require an error
            raise DecodeError(f"{kind.__name__}.error must be an error, got {type(p.error).__name__}")
        if not self.open_received:
            if kind is not d.Open:
                raise AMQPError(Condition.NOT_ALLOWED, f"expected OPEN, got {kind.__name__}")
            self._on_open(p, events)
            return
        if kind is d.Close:
            self.close_received = True
            if not self.close_sent:
                self._send_frame(0, d.Close())
                self.close_sent = True
            self.phase = DONE
            events.append(ConnectionClosed(p.error, remote=True))
            return
        if kind is d.Open:
            raise AMQPError(Condition.NOT_ALLOWED, "second OPEN on a connection")
        if kind not in _SESSION_FRAMES:
            raise AMQPError(Condition.NOT_ALLOWED, f"{kind.__name__} is not a connection frame")
        if self.close_sent:
            return  # [2.4.4] after our CLOSE we only wait for theirs
        if kind is d.Begin:
            self._on_begin(frame.channel, p, events)
            return
        session = self.remote_sessions.get(frame.channel)
        if session is None:
            raise AMQPError(Condition.NOT_ALLOWED, f"frame on channel {frame.channel} with no session begun")
        if session.end_sent:
            if kind is d.End:
                session.end_received = True
                self._session_done(session, frame.channel)
                events.append(SessionEnded(session, p.error, True))
            return  # everything else for an ending session is discarded [2.5.5]
        try:
            events.extend(session._on_frame(p, frame.payload))
        except SessionError as e:
            session.end(e.condition, e.description)
            events.append(SessionEnded(session, bounded_error(e.condition, e.description), False))
            return
        if kind is d.End:
            self._session_done(session, frame.channel)

    def _on_open(self, p: Any, events: list) -> None:
        if p.max_frame_size < MIN_MAX_FRAME_SIZE:
            raise AMQPError(Condition.INVALID_FIELD, f"max-frame-size {p.max_frame_size} is below 512")
        self.open_received = True
        self.remote_open = p
        self.remote_max_frame_size = p.max_frame_size
        self.remote_channel_max = p.channel_max
        self.remote_idle_timeout = p.idle_time_out / 1000 if p.idle_time_out else None
        events.append(ConnectionOpened(p))

    def _on_begin(self, channel: int, b: Any, events: list) -> None:
        if channel > self.channel_max:
            raise AMQPError(
                Condition.FRAMING_ERROR, f"channel {channel} exceeds channel-max {self.channel_max}"
            )
        if channel in self.remote_sessions:
            raise AMQPError(Condition.NOT_ALLOWED, f"channel {channel} already has a session")
        if b.remote_channel is not None:  # the reply to our BEGIN
            session = self.sessions.get(b.remote_channel)
            if session is None or not session.begin_sent or session.remote_begun:
                raise AMQPError(
                    Condition.NOT_ALLOWED, f"BEGIN answers channel {b.remote_channel} we never began"
                )
        else:
            session = Session(self, self._free_channel())
            session.handle_max = self.handle_max
            self.sessions[session.channel] = session
        session.remote_channel = channel
        session._on_begin(b)
        self.remote_sessions[channel] = session
        events.append(SessionBegun(session, b))

    def _session_end_sent(self, session: Session) -> None:
        if session.end_received:
            self._session_done(session, session.remote_channel)

    def _session_done(self, session: Session, remote_channel: int | None) -> None:
        self.sessions.pop(session.channel, None)
        if remote_channel is not None:
            self.remote_sessions.pop(remote_channel, None)

    def _on_sasl(self, frame: Frame, events: list) -> None:
        p = frame.performative
        if frame.type != FRAME_SASL or p is None:
            raise AMQPError(Condition.FRAMING_ERROR, "expected a SASL frame")
        kind = type(p)
        if self.role == SERVER:
            if kind is not d.SaslInit and kind is not d.SaslResponse:
                raise AMQPError(Condition.NOT_ALLOWED, f"unexpected {kind.__name__} from a SASL client")
            if kind is d.SaslInit:
                events.append(SaslInitReceived(p.mechanism, p.initial_response, p.hostname))
                self._sasl_paused = True  # until the application gives the outcome
            return
        if kind is d.SaslMechanisms:
            events.append(SaslMechanismsReceived(list(p.sasl_server_mechanisms)))
        elif kind is d.SaslOutcome:
            events.append(SaslOutcomeReceived(p.code))
            if p.code == d.SASL_OK:
                self.sasl_done = True
                self.phase = HDR
                self._parser.expect_header = True
                self._out.append(AMQP_HEADER)
            else:
                self.phase = DONE
        elif kind is not d.SaslChallenge:
            raise AMQPError(Condition.NOT_ALLOWED, f"unexpected {kind.__name__} from a SASL server")
