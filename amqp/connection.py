"""The connection endpoint [2.4]: CLOSE, idle timeout, the sessions by
channel and the routing of frames to them. Its opening (protocol headers,
SASL [5.3], OPEN) is its `Handshake` (amqp/handshake.py).

Sans-I/O in the manner of h11: feed bytes to `receive_data()`, act on the
events it returns, and write out `data_to_send()`. Any protocol violation by
the peer is answered here with the right frame (CLOSE, END or DETACH carrying
the AMQP condition) and reported as an event; nothing else escapes.

Connection, Session (amqp/session.py) and Link (amqp/link.py) are each one
whole class, in one file, helped by objects they own for a job of their own
(the Handshake; a session's SessionLinks). They were input and output halves
(mixins) over two files that called each other's private members; now what
one may use of another is declared where it is defined, under "the engine's
own interface" in each class: public members meant for the engine's objects
(and amqp/transfer_run.py), not for applications. The delivery path keeps its
cost: those members are the same attributes and methods under public names.
tests/amqp/test_engine_layout.py fails if one reads a private member of another.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from . import definitions as d
from .errors import AMQPError, Condition, DecodeError, LocalProtocolError, SessionError
from .events import ConnectionClosed, SessionBegun, SessionEnded
from .framing import (
    FRAME_AMQP,
    FRAME_SASL,
    HEARTBEAT,
    MIN_MAX_FRAME_SIZE,
    Frame,
    FrameParser,
    bounded_error,
    encode_frame,
)
from .handshake import AMQP, CLIENT, DONE, HDR, SASL, SERVER, Handshake  # noqa: F401 - the states are part of this module's API
from .session import Session
from .transfer_run import take_transfers

_WITH_ERROR = frozenset({d.Close, d.End, d.Detach})
_SESSION_FRAMES = frozenset({d.Begin, d.Attach, d.Flow, d.Transfer, d.Disposition, d.Detach, d.End})


class Connection:
    # Publishers' usual TRANSFER frames are taken in one loop (amqp/transfer_run.py);
    # off, every frame takes the generic path (tests compare the two)
    transfer_run = True

    def __init__(
        self,
        role: str = SERVER,
        container_id: str = "warren",
        max_frame_size: int = 131072,
        channel_max: int = 65535,
        idle_timeout: float | None = None,
        sasl_mechanisms: list[str] | None = None,
        require_sasl: bool = True,
        clock: Callable[[], float] = time.monotonic,
        handle_max: int = 0xFFFFFFFF,
    ):
        self.role = role
        self.container_id = container_id
        self.max_frame_size = max_frame_size
        self.channel_max = channel_max
        # The handle-max of every session the peer begins, in force from its
        # BEGIN on: ATTACHes pipelined behind the BEGIN are read before the
        # application answers it, and must meet the same limit [2.7.2].
        self.handle_max = handle_max
        self.idle_timeout = idle_timeout  # seconds; we close if the peer is silent this long
        self.sasl_mechanisms = sasl_mechanisms if sasl_mechanisms is not None else ["PLAIN", "ANONYMOUS"]
        self.require_sasl = require_sasl
        self.clock = clock
        # the engine's own interface: the frames owed to the peer (a session
        # appends its transfers here itself: the delivery path) and the parser,
        # whose buffer amqp/transfer_run.py reads in place
        self.parser = FrameParser(max_frame_size)
        self.out: list[bytes] = []
        self.handshake = Handshake(self)
        self.phase = HDR
        self.sasl_done = False
        self.header_sent = False
        self.open_sent = False
        self.open_received = False
        self.close_sent = False
        self.close_received = False
        self.remote_open: Any = None
        self.remote_max_frame_size = MIN_MAX_FRAME_SIZE  # until the peer's OPEN [2.7.1]
        self.remote_channel_max = 65535
        self.remote_idle_timeout: float | None = None
        self.sessions: dict[int, Session] = {}  # by our channel
        self.remote_sessions: dict[int, Session] = {}  # by the peer's channel
        self.last_received = self.last_sent = clock()
        self.error: Any = None  # the error we closed with, if any
        self.context: Any = None
        # Events raised outside receive_data() (by tick() or by an application
        # call that could not be honoured); the next receive_data() returns them.
        self._pending_events: list = []
        # Server: a SASL init is waiting for the application's outcome; bytes the
        # client pipelined behind it stay buffered until sasl_outcome() [5.3.2].
        self.input_paused = False
        # True when bytes the peer already sent wait for `receive_data(b"")`:
        # a client may pipeline its AMQP header and OPEN behind its SASL init,
        # and nothing more may ever arrive to process them [5.3.2].
        self.input_pending = False

    # ----------------------------------------------------------- I/O boundary

    def receive_data(self, data: bytes) -> list:
        """Consumes bytes from the peer; returns the events they caused.

        `receive_data(b"")` processes bytes already buffered, e.g. those a
        client pipelined behind its SASL init, once `sasl_outcome()` is given.
        """
        events, self._pending_events = self._pending_events, []
        self.input_pending = False
        if self.phase == DONE:
            return events
        if data:
            self.last_received = self.clock()
            self.parser.feed(data)
        parser = self.parser
        try:
            while self.phase != DONE and not self.input_paused:
                if self.transfer_run and self.phase == AMQP and self.open_received and not (
                        self.close_received or self.close_sent or parser.expect_header):  # fmt: skip
                    take_transfers(self, events)  # the frames of a publisher's usual messages
                item = parser.next()
                if item is None:
                    break
                if type(item) is Frame:
                    self._on_frame(item, events)
                else:
                    self.handshake.on_header(item, events)
        except AMQPError as e:
            self._fail(e.condition, e.description, events)
        except LocalProtocolError as e:  # peer input drove us into an impossible move
            self._fail(Condition.INTERNAL_ERROR, str(e), events)
        if self._pending_events:  # an application-level failure while handling input
            events += self._pending_events
            self._pending_events = []
        return events

    def data_to_send(self) -> bytes:
        """All bytes due to the peer since the last call."""
        for s in self.sessions.values():
            if s.dispositions or s.flow_due:
                s.flush()
        if not self.out:
            return b""
        out = self.out[0] if len(self.out) == 1 else b"".join(self.out)
        self.out = []
        self.last_sent = self.clock()
        return out

    @property
    def output_bytes(self) -> int:
        """Bytes due to the peer and not yet taken by `data_to_send()`, plus
        the transfers its session windows hold back: what this connection
        buffers for the peer."""
        return sum(map(len, self.out)) + sum(s.waiting_bytes for s in self.sessions.values())

    @property
    def closed(self) -> bool:
        """True once nothing more will be read; flush, then close the socket."""
        return self.phase == DONE

    def tick(self, now: float | None = None) -> float | None:
        """Handles idle timeouts [2.4.5]; returns when to call again."""
        if self.phase == DONE:
            return None
        now = self.clock() if now is None else now
        deadlines = []
        if self.idle_timeout and self.open_sent:
            if now - self.last_received >= self.idle_timeout:
                self.fail(Condition.RESOURCE_LIMIT_EXCEEDED, "local-idle-timeout expired")
                return None
            deadlines.append(self.last_received + self.idle_timeout)
        if self.remote_idle_timeout and self.phase == AMQP and not self.close_sent:
            interval = self.remote_idle_timeout / 2
            if now - self.last_sent >= interval and not self.out:
                self.out.append(HEARTBEAT)
                self.last_sent = now
            deadlines.append(self.last_sent + interval)
        return min(deadlines) if deadlines else None

    # ----------------------------------------------------------- application API

    def start(self, sasl: bool = True) -> None:
        """Client: sends the first protocol header."""
        if self.role != CLIENT:
            raise LocalProtocolError("only a client starts the connection")
        self.handshake.start(sasl)

    def sasl_init(self, mechanism: str, initial_response: bytes | None = None, hostname: str | None = None) -> None:
        self.send_frame(0, d.SaslInit(mechanism=mechanism, initial_response=initial_response, hostname=hostname),
                        type_=FRAME_SASL)  # fmt: skip

    def sasl_outcome(self, ok: bool, code: int | None = None) -> None:
        """Server: answers the client's SASL init. A failed outcome ends the
        connection: there is nothing more to say on it [5.3.2]."""
        self.handshake.sasl_outcome(ok, code)

    def open(self, hostname: str | None = None, properties: dict | None = None,
             offered_capabilities: list | None = None, desired_capabilities: list | None = None) -> None:  # fmt: skip
        self.handshake.open(hostname, properties, offered_capabilities, desired_capabilities)

    def close(self, condition: str | None = None, description: str | None = None) -> None:
        if self.close_sent or self.phase == DONE and not self.open_sent:
            return
        if self.phase in (HDR, SASL):  # no AMQP frame may flow yet: just hang up
            self.phase = DONE
            return
        error = bounded_error(condition, description) if condition else None
        if not self.open_sent:  # [2.4.6] a CLOSE must follow an OPEN
            self.open()
        self.send_frame(0, d.Close(error=error))
        self.close_sent = True
        self.error = error
        if self.close_received:
            self.phase = DONE

    def create_session(self) -> Session:
        """A session we initiate; call `begin()` on it."""
        channel = self._free_channel()
        s = Session(self, channel)
        self.sessions[channel] = s
        return s

    # ----------------------------------------------------------- the engine's own interface

    def send_frame(self, channel: int, performative: Any, payload: bytes = b"", type_: int = FRAME_AMQP) -> None:
        """Queues one frame; the sessions and links send theirs through here."""
        if not self.can_send:
            return  # nothing may follow our CLOSE [2.4.4]
        frame = encode_frame(channel, performative, payload, type_)
        if len(frame) > self.remote_max_frame_size and type_ == FRAME_AMQP and self.open_received:
            # [2.7.1] nothing but a transfer may be split across frames. This
            # may run inside an application call (an ATTACH reply), so the
            # failure is reported as an event, not raised at the caller.
            self.fail(Condition.FRAME_SIZE_TOO_SMALL,
                      f"a {type(performative).__name__} of {len(frame)} bytes exceeds the peer's max-frame-size")  # fmt: skip
            return
        self.out.append(frame)

    @property
    def can_send(self) -> bool:
        """False once our CLOSE went out or the connection failed."""
        return not self.close_sent and self.phase != DONE

    def fail(self, condition: str, description: str | None) -> None:
        """Closes the connection with an error found outside `receive_data()`
        (inside an application call, or by `tick()`); the next
        `receive_data()` returns its ConnectionClosed."""
        self._fail(condition, description, self._pending_events)

    def session_end_sent(self, session: Session) -> None:
        """The session's END went out: once both ENDs passed, its channels are free."""
        if session.end_received:
            self._session_done(session, session.remote_channel)

    # ----------------------------------------------------------- internals

    def _fail(self, condition: str, description: str | None, events: list) -> None:
        """Closes the connection with an error we detected."""
        if self.phase == DONE:
            return
        error = bounded_error(condition, description)
        self.error = error
        if self.phase == HDR and self.role == SERVER:
            # [2.2] a header we cannot read is answered with the one we speak
            self.out.append(self.handshake.expected_header())
        if self.phase == AMQP and not self.close_sent:
            if not self.open_sent:
                self.open_sent = True
                self.out.append(encode_frame(0, d.Open(container_id=self.container_id)))
            self.close_sent = True
            self.out.append(encode_frame(0, d.Close(error=error)))
        self.phase = DONE
        events.append(ConnectionClosed(error, remote=False))

    def _free_channel(self) -> int:
        channel = 0
        while channel in self.sessions:
            channel += 1
        if channel > min(self.channel_max, self.remote_channel_max):
            raise LocalProtocolError("no free channel below channel-max")
        return channel

    def _on_frame(self, frame: Frame, events: list) -> None:
        p = frame.performative
        if self.phase == SASL:
            self.handshake.on_sasl(frame, events)
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
            self.handshake.on_open(p, events)
            return
        if kind is d.Close:
            self.close_received = True
            if not self.close_sent:
                self.send_frame(0, d.Close())
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
            events.extend(session.receive(p, frame.payload))
        except SessionError as e:
            session.end(e.condition, e.description)
            events.append(SessionEnded(session, bounded_error(e.condition, e.description), False))
            return
        if kind is d.End:
            self._session_done(session, frame.channel)

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
        session.on_begin(b)
        self.remote_sessions[channel] = session
        events.append(SessionBegun(session, b))

    def _session_done(self, session: Session, remote_channel: int | None) -> None:
        self.sessions.pop(session.channel, None)
        if remote_channel is not None:
            self.remote_sessions.pop(remote_channel, None)
