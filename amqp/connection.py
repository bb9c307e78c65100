"""The connection endpoint [2.4]: protocol headers, SASL [5.3], OPEN/CLOSE,
idle timeout, and the routing of frames to sessions.

Sans-I/O in the manner of h11: feed bytes to `receive_data()`, act on the
events it returns, and write out `data_to_send()`. Any protocol violation by
the peer is answered here with the right frame (CLOSE, END or DETACH carrying
the AMQP condition) and reported as an event; nothing else escapes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from . import definitions as d
from .connection_input import AMQP, CLIENT, DONE, HDR, SASL, SERVER, ConnectionInput  # noqa: F401 - the states are part of this module's API
from .errors import AMQPError, Condition, LocalProtocolError
from .events import (
    ConnectionClosed,
)
from .framing import (
    AMQP_HEADER,
    FRAME_AMQP,
    FRAME_SASL,
    HEARTBEAT,
    MIN_MAX_FRAME_SIZE,
    SASL_HEADER,
    Frame,
    FrameParser,
    bounded_error,
    encode_frame,
)
from .session import Session
from .transfer_run import take_transfers


class Connection(ConnectionInput):
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
        self._parser = FrameParser(max_frame_size)
        self._out: list[bytes] = []
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
        self._sasl_paused = False
        self._input_resumed = False  # see `input_pending`

    # ----------------------------------------------------------- I/O boundary

    def receive_data(self, data: bytes) -> list:
        """Consumes bytes from the peer; returns the events they caused.

        `receive_data(b"")` processes bytes already buffered, e.g. those a
        client pipelined behind its SASL init, once `sasl_outcome()` is given.
        """
        events, self._pending_events = self._pending_events, []
        self._input_resumed = False
        if self.phase == DONE:
            return events
        if data:
            self.last_received = self.clock()
            self._parser.feed(data)
        parser = self._parser
        try:
            while self.phase != DONE and not self._sasl_paused:
                if self.transfer_run and self.phase == AMQP and self.open_received and not (
                        self.close_received or self.close_sent or parser.expect_header):  # fmt: skip
                    take_transfers(self, events)  # the frames of a publisher's usual messages
                item = parser.next()
                if item is None:
                    break
                if type(item) is Frame:
                    self._on_frame(item, events)
                else:
                    self._on_header(item, events)
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
            if s._dispositions or s._flow_due:
                s._flush()
        if not self._out:
            return b""
        out = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out = []
        self.last_sent = self.clock()
        return out

    @property
    def output_bytes(self) -> int:
        """Bytes due to the peer and not yet taken by `data_to_send()`, plus
        the transfers its session windows hold back: what this connection
        buffers for the peer."""
        return sum(map(len, self._out)) + sum(s.waiting_bytes for s in self.sessions.values())

    @property
    def input_pending(self) -> bool:
        """True when bytes the peer already sent wait for `receive_data(b"")`:
        a client may pipeline its AMQP header and OPEN behind its SASL init, and
        nothing more may ever arrive to process them [5.3.2]."""
        return self._input_resumed

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
                self._fail(Condition.RESOURCE_LIMIT_EXCEEDED, "local-idle-timeout expired", self._pending_events)
                return None
            deadlines.append(self.last_received + self.idle_timeout)
        if self.remote_idle_timeout and self.phase == AMQP and not self.close_sent:
            interval = self.remote_idle_timeout / 2
            if now - self.last_sent >= interval and not self._out:
                self._out.append(HEARTBEAT)
                self.last_sent = now
            deadlines.append(self.last_sent + interval)
        return min(deadlines) if deadlines else None

    # ----------------------------------------------------------- application API

    def start(self, sasl: bool = True) -> None:
        """Client: sends the first protocol header."""
        if self.role != CLIENT:
            raise LocalProtocolError("only a client starts the connection")
        self._sasl_expected = sasl
        self._out.append(SASL_HEADER if sasl else AMQP_HEADER)
        self.header_sent = True

    def sasl_init(
        self, mechanism: str, initial_response: bytes | None = None, hostname: str | None = None
    ) -> None:
        self._send_frame(0, d.SaslInit(mechanism=mechanism, initial_response=initial_response, hostname=hostname),
                         type_=FRAME_SASL)  # fmt: skip

    def sasl_outcome(self, ok: bool, code: int | None = None) -> None:
        """Server: answers the client's SASL init. A failed outcome ends the
        connection: there is nothing more to say on it [5.3.2]."""
        if code is None:
            code = d.SASL_OK if ok else d.SASL_AUTH
        self._send_frame(0, d.SaslOutcome(code=code), type_=FRAME_SASL)
        self._sasl_paused = False
        self._input_resumed = ok and self._parser.buffered > 0
        if ok:
            self.sasl_done = True
            self.phase = HDR
            self._parser.expect_header = True
        else:
            self.phase = DONE

    def open(self, hostname: str | None = None, properties: dict | None = None,
             offered_capabilities: list | None = None, desired_capabilities: list | None = None) -> None:  # fmt: skip
        if self.open_sent:
            if self.close_sent or self.phase == DONE:
                return  # we already failed the connection while reading; the event may be stale
            raise LocalProtocolError("connection already opened")
        self.open_sent = True
        self._send_frame(
            0,
            d.Open(
                container_id=self.container_id,
                hostname=hostname,
                max_frame_size=self.max_frame_size,
                channel_max=self.channel_max,
                # [2.4.5] advertise half the threshold we enforce, so a peer that
                # heartbeats at the advertised period is never cut off
                idle_time_out=int(self.idle_timeout * 500) if self.idle_timeout else None,
                offered_capabilities=offered_capabilities,
                desired_capabilities=desired_capabilities,
                properties=properties,
            ),
        )

    def close(self, condition: str | None = None, description: str | None = None) -> None:
        if self.close_sent or self.phase == DONE and not self.open_sent:
            return
        if self.phase in (HDR, SASL):  # no AMQP frame may flow yet: just hang up
            self.phase = DONE
            return
        error = bounded_error(condition, description) if condition else None
        if not self.open_sent:  # [2.4.6] a CLOSE must follow an OPEN
            self.open()
        self._send_frame(0, d.Close(error=error))
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

    # ----------------------------------------------------------- internals

    def _send_frame(
        self, channel: int, performative: Any, payload: bytes = b"", type_: int = FRAME_AMQP
    ) -> None:
        if not self._can_send:
            return  # nothing may follow our CLOSE [2.4.4]
        frame = encode_frame(channel, performative, payload, type_)
        if len(frame) > self.remote_max_frame_size and type_ == FRAME_AMQP and self.open_received:
            # [2.7.1] nothing but a transfer may be split across frames. This
            # may run inside an application call (an ATTACH reply), so the
            # failure is reported as an event, not raised at the caller.
            self._fail(Condition.FRAME_SIZE_TOO_SMALL,
                       f"a {type(performative).__name__} of {len(frame)} bytes exceeds the peer's max-frame-size",
                       self._pending_events)  # fmt: skip
            return
        self._out.append(frame)

    @property
    def _can_send(self) -> bool:
        return not self.close_sent and self.phase != DONE

    def _fail(self, condition: str, description: str | None, events: list) -> None:
        """Closes the connection with an error we detected."""
        if self.phase == DONE:
            return
        error = bounded_error(condition, description)
        self.error = error
        if self.phase == HDR and self.role == SERVER:
            # [2.2] a header we cannot read is answered with the one we speak
            self._out.append(self._expected_header())
        if self.phase == AMQP and not self.close_sent:
            if not self.open_sent:
                self.open_sent = True
                self._out.append(encode_frame(0, d.Open(container_id=self.container_id)))
            self.close_sent = True
            self._out.append(encode_frame(0, d.Close(error=error)))
        self.phase = DONE
        events.append(ConnectionClosed(error, remote=False))

    def _free_channel(self) -> int:
        channel = 0
        while channel in self.sessions:
            channel += 1
        if channel > min(self.channel_max, self.remote_channel_max):
            raise LocalProtocolError("no free channel below channel-max")
        return channel
