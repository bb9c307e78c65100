"""Session endpoints [2.5]: channels, transfer windows, delivery ids, links.

Window accounting follows [2.5.6]: every TRANSFER frame spends one unit of the
receiver's incoming-window. Transfers we cannot send yet (the peer's window
is shut) wait here, in order, and go out as FLOW reopens the window; one slow
link therefore never reorders another. Dispositions we owe are gathered and
sent once per flush as ranges of contiguous delivery ids.

One whole class; its links' handles and ATTACH/DETACH pairing are its
`SessionLinks` (amqp/session_links.py). The connection, the links and
amqp/transfer_run.py use the members under "the engine's own interface".
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from . import serial
from .definitions import RECEIVER, SENDER, Attach, Begin, Detach, Disposition, End, Flow, Transfer
from .errors import AMQPError, Condition, LinkError, LocalProtocolError, SessionError
from .events import (
    DeliveriesUpdated,
    Delivery,
    DeliveryAborted,
    LinkDetached,
    LinkFlow,
    MessageReceived,
    SessionEnded,
)
from .fastpath import encode_transfer_frame
from .framing import bounded_error, transfer_frames
from .link import Link
from .session_links import SessionLinks, remote_link
from .unsettled import UnsettledMap

if TYPE_CHECKING:
    from .connection import Connection

DEFAULT_INCOMING_WINDOW = 2048
OUTGOING_WINDOW = 0x7FFFFFFF  # we never limit our own outgoing transfers
FRAME_HEADER = 8


class Session:
    def __init__(self, connection: Connection, channel: int, incoming_window: int = DEFAULT_INCOMING_WINDOW):
        self.connection = connection
        self.channel = channel
        self.remote_channel: int | None = None
        self.begin_sent = False
        self.remote_begun = False
        self.end_sent = False
        self.end_received = False
        # [2.5.6] session flow state
        self.next_outgoing_id = 0
        self.outgoing_window = OUTGOING_WINDOW
        self.incoming_window_max = incoming_window
        self.incoming_window = incoming_window
        self.next_incoming_id = 0
        self.remote_incoming_window = 0
        self.remote_outgoing_window = 0
        self.handle_max = 0xFFFFFFFF
        self.remote_handle_max = 0xFFFFFFFF
        # While blocked (resource alarm) we advertise a window of 0 but still
        # accept the transfers the peer may have sent under the window we gave
        # before: `incoming_window` keeps counting that allowance down.
        self.blocked = False
        self.link_table = SessionLinks(self)
        self.links = self.link_table.by_handle  # by our handle
        self.remote_links = self.link_table.by_remote_handle  # by the peer's handle
        self.next_delivery_id = 0
        self.outgoing_unsettled = UnsettledMap()  # delivery id -> Delivery
        self.incoming_unsettled = UnsettledMap()
        # Held by the peer's window, in order: (link, transfer frame, None) or
        # (link, None, link state) for a sender's FLOW that must not overtake
        # its link's transfers (it carries a delivery-count that counts them).
        self._waiting: deque[tuple[Link, bytes | None, tuple | None]] = deque()
        self.waiting_bytes = 0  # the size of the transfer frames in `_waiting`
        # (the engine's own interface, read by the connection's flush and
        # amqp/transfer_run.py) runs of consecutive delivery ids with one role,
        # settled flag and state: [first id, last id, role, settled, state]
        self.dispositions: list[list] = []
        self.flow_due = False  # our incoming window is half spent: a FLOW goes with the next flush
        self.context: Any = None  # the application's object for this session

    # ----------------------------------------------------------- application API

    def begin(self, incoming_window: int | None = None, handle_max: int | None = None, properties=None) -> None:
        if self.begin_sent:
            if self.end_sent:
                return  # the engine already ended it (a SessionBegun read in the same batch)
            raise LocalProtocolError("session already begun")
        if incoming_window is not None:
            self.incoming_window_max = self.incoming_window = incoming_window
        if handle_max is not None:
            self.handle_max = handle_max
        self.begin_sent = True
        self.send(
            Begin(
                remote_channel=self.remote_channel,
                next_outgoing_id=self.next_outgoing_id,
                incoming_window=self.advertise_window(),
                outgoing_window=self.outgoing_window,
                handle_max=self.handle_max,
                properties=properties,
            )
        )

    def end(self, condition: str | None = None, description: str | None = None) -> None:
        if self.end_sent:
            return
        if not self.begin_sent and self.remote_begun:  # [2.5.1] END only after our BEGIN
            self.begin()
        self.end_sent = True
        self._waiting.clear()
        self.waiting_bytes = 0
        self.send(End(error=bounded_error(condition, description) if condition else None))
        self.connection.session_end_sent(self)

    def create_link(self, name: str, role: bool) -> Link:
        """A link we initiate; call `attach()` on it."""
        return self.link_table.create(name, role)

    def settle(self, delivery: Delivery, state: Any = None, settled: bool = True) -> None:
        """Sets our state for a delivery (and settles it); the DISPOSITION goes
        out with the next flush, merged with its neighbours."""
        delivery.state = state
        role = delivery.link.role
        delivery_id = delivery.id
        if settled:
            delivery.settled = True
            (self.outgoing_unsettled if role == SENDER else self.incoming_unsettled).pop(delivery_id, None)
        runs = self.dispositions
        if runs:
            # a publisher's confirms come in delivery-id order with one outcome: one run grows
            run = runs[-1]
            if (delivery_id == (run[1] + 1) & serial.MASK and run[4] is state and run[3] == settled
                    and run[2] == role):  # fmt: skip
                run[1] = delivery_id
                return
        runs.append([delivery_id, delivery_id, role, settled, state])

    def block(self) -> None:
        """Shuts the incoming window (memory or disk alarm)."""
        if not self.blocked:
            self.blocked = True
            self.send_flow()

    def unblock(self) -> None:
        if self.blocked:
            self.blocked = False
            self.incoming_window = self.incoming_window_max
            self.send_flow()

    @property
    def advertised_incoming_window(self) -> int:
        """The incoming-window our next BEGIN or FLOW will carry."""
        return 0 if self.blocked else self.incoming_window_max

    @property
    def waiting_transfers(self) -> int:
        """Transfer frames held back by the peer's incoming window."""
        return sum(1 for _, frame, _ in self._waiting if frame is not None)

    # ----------------------------------------------------------- the engine's own interface

    def advertise_window(self) -> int:
        """Called as a BEGIN or FLOW is built: the window it carries becomes
        the peer's allowance. `incoming_window` only grows here, when the peer
        is told, never on our side alone: refilling it early would let a peer
        that ignores our window send without limit [2.5.6]."""
        if not self.blocked:
            self.incoming_window = self.incoming_window_max
        return self.advertised_incoming_window

    def send(self, performative: Any, payload: bytes = b"") -> None:
        """Queues a frame on this session's channel."""
        self.connection.send_frame(self.channel, performative, payload)

    def send_flow(self, echo: bool = False) -> None:
        """Sends the session's FLOW (no link's state)."""
        self.flow_due = False
        if self.end_sent or not self.begin_sent:
            return
        self.send(
            Flow(
                next_incoming_id=self.next_incoming_id if self.remote_begun else None,
                incoming_window=self.advertise_window(),
                next_outgoing_id=self.next_outgoing_id,
                outgoing_window=self.outgoing_window,
                echo=echo,
            )
        )

    def send_delivery(self, link: Link, tag: bytes, payload: bytes, settled: bool, message_format: int,
                      state: Any) -> Delivery:  # fmt: skip
        """Numbers and queues a delivery `link.send()` admitted."""
        delivery_id = self.next_delivery_id
        self.next_delivery_id = serial.add(delivery_id, 1)
        d = Delivery(delivery_id, tag, link, settled, b"", message_format, state)
        if not settled:
            self.outgoing_unsettled[delivery_id] = d
        conn = self.connection
        if state is None and len(tag) <= 32:
            frame = encode_transfer_frame(self.channel, link.handle, delivery_id, tag, settled, payload, message_format)
            if len(frame) <= conn.remote_max_frame_size:
                self._queue_transfer(link, frame)
                return d
        first = Transfer(handle=link.handle, delivery_id=delivery_id, delivery_tag=tag, message_format=message_format,
                         settled=settled, state=state)  # fmt: skip
        frames = transfer_frames(self.channel, first, payload, conn.remote_max_frame_size)
        if frames is None:  # reported as an event: this runs inside the application's send()
            conn.fail(Condition.FRAME_SIZE_TOO_SMALL, "the transfer performative does not fit in a frame")
            return d
        for frame in frames:  # [2.6.14] more than one when the message needs more than a frame
            self._queue_transfer(link, frame)
        return d

    def hold_flow(self, link: Link, state: tuple) -> bool:
        """A sender's FLOW waits behind the link's transfers the peer's window
        holds (its delivery-count counts them): True if it was held."""
        if not any(item[0] is link for item in self._waiting):
            return False
        self._waiting.append((link, None, state))
        return True

    def flush(self) -> None:
        """Called once per connection flush: sends gathered dispositions and
        a window update if one is due."""
        if self.dispositions and not self.end_sent:
            self._send_dispositions()
        if self.flow_due:
            self.send_flow()

    def link_detach_sent(self, link: Link) -> list[Delivery]:
        """Our DETACH went out: its unsettled outgoing deliveries are over."""
        unsettled = [d for d in self.outgoing_unsettled.values() if d.link is link]
        for d in unsettled:
            del self.outgoing_unsettled[d.id]
        if self._waiting:
            # its held transfers must not follow the DETACH onto an unattached
            # handle; their deliveries are among `unsettled` (or were pre-settled)
            self._waiting = deque(item for item in self._waiting if item[0] is not link)
            self.waiting_bytes = sum(len(frame) for _, frame, _ in self._waiting if frame is not None)
        self.link_table.forget_if_done(link)
        link.unsettled_at_detach = unsettled
        return unsettled

    def on_begin(self, b: Any) -> None:
        """The peer's BEGIN [2.5.1]."""
        self.remote_begun = True
        self.next_incoming_id = b.next_outgoing_id
        self.remote_incoming_window = b.incoming_window
        self.remote_outgoing_window = b.outgoing_window
        self.remote_handle_max = b.handle_max

    def receive(self, p: Any, payload: bytes) -> list:
        """A frame the peer sent on this session's channel; returns its events."""
        kind = type(p)
        if kind is Transfer:
            return self._on_transfer(p, payload)
        if kind is Disposition:
            return self._on_disposition(p)
        if kind is Flow:
            return self._on_flow(p)
        if kind is Attach:
            return self.link_table.on_attach(p)
        if kind is Detach:
            return self.link_table.on_detach(p)
        if kind is End:
            return self._on_end(p)
        raise AMQPError(Condition.NOT_ALLOWED, f"{kind.__name__} is not allowed on a session channel")

    # ----------------------------------------------------------- internals: output

    def _queue_transfer(self, link: Link, frame: bytes) -> None:
        if not self.connection.can_send:
            return  # nothing may follow our CLOSE [2.4.4]
        if self._waiting or self.remote_incoming_window <= 0:
            self._waiting.append((link, frame, None))
            self.waiting_bytes += len(frame)
            return
        self._spend_outgoing()
        self.connection.out.append(frame)

    def _spend_outgoing(self) -> None:
        self.next_outgoing_id = serial.add(self.next_outgoing_id, 1)
        self.remote_incoming_window -= 1

    def _release_waiting(self) -> None:
        out = self.connection.out
        if not self.connection.can_send:
            self._waiting.clear()
            self.waiting_bytes = 0
            return
        while self._waiting:
            link, frame, held = self._waiting[0]
            if frame is None:  # a held FLOW: the transfers before it are out
                self._waiting.popleft()
                link.send_flow(False, held)
                continue
            if self.remote_incoming_window <= 0:
                break
            self._waiting.popleft()
            self.waiting_bytes -= len(frame)
            self._spend_outgoing()
            out.append(frame)

    def _send_dispositions(self) -> None:
        runs, self.dispositions = self.dispositions, []
        for first, last, role, settled, state in merged_runs(runs):
            self.send(Disposition(role=role, first=first, last=last if last != first else None, settled=settled,
                                  state=state))  # fmt: skip

    # ----------------------------------------------------------- internals: input

    def _on_transfer(self, t: Any, payload: bytes) -> list:
        if self.incoming_window <= 0:
            raise SessionError(Condition.WINDOW_VIOLATION, "transfer beyond the session incoming-window")
        self.next_incoming_id = serial.add(self.next_incoming_id, 1)
        self.incoming_window -= 1
        if self.remote_outgoing_window > 0:
            self.remote_outgoing_window -= 1
        if not self.blocked and self.incoming_window <= self.incoming_window_max // 2:
            self.flow_due = True  # the FLOW, when sent, refills the window
        link = remote_link(self.remote_links, t.handle)
        if link.detach_sent:
            return []  # frames for a link we detached are dropped [2.6.5]
        try:
            d = link.on_transfer(t, payload)
        except LinkError as e:
            return self._link_failed(link, e)
        if d is None:
            return []
        if t.aborted:
            return [DeliveryAborted(link, d)]
        if not d.settled:
            self.incoming_unsettled[d.id] = d
        return [MessageReceived(link, d)]

    def _link_failed(self, link: Link, e: AMQPError) -> list:
        link.detach(closed=True, condition=e.condition, description=e.description)
        return [LinkDetached(link, bounded_error(e.condition, e.description), True, False,
                             link.unsettled_at_detach)]  # fmt: skip

    def _on_flow(self, f: Any) -> list:
        # [2.5.6] remote-incoming-window = next-incoming-id(flow) + incoming-window(flow) - next-outgoing-id
        base = f.next_incoming_id if f.next_incoming_id is not None else 0
        self.remote_incoming_window = serial.diff(serial.add(base, f.incoming_window), self.next_outgoing_id)
        self.remote_outgoing_window = f.outgoing_window
        self._release_waiting()
        if f.handle is None:
            if f.echo:
                self.send_flow()
            return []
        link = remote_link(self.remote_links, f.handle)
        if link.detach_sent:
            return []
        link.on_flow(f)
        if f.echo and not link.is_sender:
            link.send_flow(False)
        return [LinkFlow(link, f.drain, f.echo)]

    def _on_disposition(self, d: Any) -> list:
        # role names the sender of the DISPOSITION: a receiver settles what we sent
        table = self.outgoing_unsettled if d.role == RECEIVER else self.incoming_unsettled
        first = d.first
        last = d.last if d.last is not None else first
        span = (last - first) & serial.MASK
        if span >= serial.HALF:
            raise SessionError(Condition.INVALID_FIELD, "disposition range runs backwards")
        changed = table.dispose(first, last, d.state, d.settled)
        return [DeliveriesUpdated(self, changed)] if changed else []

    def _on_end(self, e: Any) -> list:
        self.end_received = True
        if not self.end_sent:
            self.end()
        return [SessionEnded(self, e.error, True)]


def merged_runs(runs: list[list]) -> list[list]:
    """Disposition runs in delivery-id order, neighbours with one role,
    settled flag and state joined: one DISPOSITION each."""
    if len(runs) > 1:
        base = runs[0][0]
        runs.sort(key=lambda run: serial.diff(run[0], base))  # stable: one id's states keep their order
    merged = [runs[0]]
    for run in runs[1:]:
        current = merged[-1]
        if run[0] == (current[1] + 1) & serial.MASK and run[2:] == current[2:]:
            merged[-1] = [current[0], run[1], *current[2:]]
        else:
            merged.append(run)
    return merged


__all__ = ["Session", "RECEIVER", "SENDER"]
