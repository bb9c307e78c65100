"""Session endpoints [2.5]: channels, transfer windows, delivery ids, links.

Window accounting follows [2.5.6]: every TRANSFER frame spends one unit of the
receiver's incoming-window. Transfers we cannot send yet (the peer's window
is shut) wait here, in order, and go out as FLOW reopens the window; one slow
link therefore never reorders another. Dispositions we owe are gathered and
sent once per flush as ranges of contiguous delivery ids.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from . import serial
from .definitions import RECEIVER, SENDER, Begin, Disposition, End, Flow, Transfer
from .errors import Condition, LocalProtocolError
from .events import (
    Delivery,
)
from .fastpath import encode_transfer_frame
from .framing import bounded_error, encode_frame
from .link import Link
from .session_input import SessionInput
from .unsettled import UnsettledMap

if TYPE_CHECKING:
    from .connection import Connection

DEFAULT_INCOMING_WINDOW = 2048
OUTGOING_WINDOW = 0x7FFFFFFF  # we never limit our own outgoing transfers
FRAME_HEADER = 8


class Session(SessionInput):
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
        self.links: dict[int, Link] = {}  # by our handle
        self.remote_links: dict[int, Link] = {}  # by the peer's handle
        self.next_delivery_id = 0
        self.outgoing_unsettled = UnsettledMap()  # delivery id -> Delivery
        self.incoming_unsettled = UnsettledMap()
        # Held by the peer's window, in order: (link, transfer frame, None) or
        # (link, None, link state) for a sender's FLOW that must not overtake
        # its link's transfers (it carries a delivery-count that counts them).
        self._waiting: deque[tuple[Link, bytes | None, tuple | None]] = deque()
        self.waiting_bytes = 0  # the size of the transfer frames in `_waiting`
        # runs of consecutive delivery ids with one role, settled flag and state:
        # [first id, last id, role, settled, state]
        self._dispositions: list[list] = []
        self._flow_due = False
        self.context: Any = None  # the application's object for this session

    # ----------------------------------------------------------- application API

    def begin(
        self, incoming_window: int | None = None, handle_max: int | None = None, properties=None
    ) -> None:
        if self.begin_sent:
            if self.end_sent:
                return  # the engine already ended it (a SessionBegun read in the same batch)
            raise LocalProtocolError("session already begun")
        if incoming_window is not None:
            self.incoming_window_max = self.incoming_window = incoming_window
        if handle_max is not None:
            self.handle_max = handle_max
        self.begin_sent = True
        self._send(
            Begin(
                remote_channel=self.remote_channel,
                next_outgoing_id=self.next_outgoing_id,
                incoming_window=self._advertise_window(),
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
        self._send(End(error=bounded_error(condition, description) if condition else None))
        self.connection._session_end_sent(self)

    def create_link(self, name: str, role: bool) -> Link:
        """A link we initiate; call `attach()` on it."""
        handle = self._free_handle()
        link = Link(self, name, handle, role)
        self.links[handle] = link
        return link

    def settle(self, delivery: Delivery, state: Any = None, settled: bool = True) -> None:
        """Sets our state for a delivery (and settles it); the DISPOSITION goes
        out with the next flush, merged with its neighbours."""
        delivery.state = state
        role = delivery.link.role
        delivery_id = delivery.id
        if settled:
            delivery.settled = True
            (self.outgoing_unsettled if role == SENDER else self.incoming_unsettled).pop(delivery_id, None)
        runs = self._dispositions
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
            self._send_flow()

    def unblock(self) -> None:
        if self.blocked:
            self.blocked = False
            self.incoming_window = self.incoming_window_max
            self._send_flow()

    @property
    def advertised_incoming_window(self) -> int:
        """The incoming-window our next BEGIN or FLOW will carry."""
        return 0 if self.blocked else self.incoming_window_max

    def _advertise_window(self) -> int:
        """Called as a BEGIN or FLOW is built: the window it carries becomes
        the peer's allowance. `incoming_window` only grows here, when the peer
        is told, never on our side alone: refilling it early would let a peer
        that ignores our window send without limit [2.5.6]."""
        if not self.blocked:
            self.incoming_window = self.incoming_window_max
        return self.advertised_incoming_window

    @property
    def waiting_transfers(self) -> int:
        """Transfer frames held back by the peer's incoming window."""
        return sum(1 for _, frame, _ in self._waiting if frame is not None)

    # ----------------------------------------------------------- internals: output

    def _send(self, performative: Any, payload: bytes = b"") -> None:
        self.connection._send_frame(self.channel, performative, payload)

    def _send_flow(self, echo: bool = False) -> None:
        self._flow_due = False
        if self.end_sent or not self.begin_sent:
            return
        self._send(
            Flow(
                next_incoming_id=self.next_incoming_id if self.remote_begun else None,
                incoming_window=self._advertise_window(),
                next_outgoing_id=self.next_outgoing_id,
                outgoing_window=self.outgoing_window,
                echo=echo,
            )
        )

    def _send_delivery(
        self, link: Link, tag: bytes, payload: bytes, settled: bool, message_format: int, state: Any
    ) -> Delivery:
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
        first = Transfer(
            handle=link.handle,
            delivery_id=delivery_id,
            delivery_tag=tag,
            message_format=message_format,
            settled=settled,
            state=state,
        )
        frame = encode_frame(self.channel, first, payload)
        limit = conn.remote_max_frame_size
        if len(frame) <= limit:
            self._queue_transfer(link, frame)
            return d
        # [2.6.14] split across frames with more=true; continuation frames
        # repeat only the handle
        head_room = limit - (len(frame) - len(payload))
        if head_room <= 0:  # reported as an event: this runs inside the application's send()
            conn._fail(Condition.FRAME_SIZE_TOO_SMALL, "the transfer performative does not fit in a frame",
                       conn._pending_events)  # fmt: skip
            return d
        first.more = True
        view = memoryview(payload)
        chunk_room = limit - len(encode_frame(self.channel, Transfer(handle=link.handle, more=True)))
        head_room = limit - (len(encode_frame(self.channel, first)))
        self._queue_transfer(link, encode_frame(self.channel, first, view[:head_room]))
        pos = head_room
        while pos < len(payload):
            end = pos + chunk_room
            more = end < len(payload)
            self._queue_transfer(
                link, encode_frame(self.channel, Transfer(handle=link.handle, more=more), view[pos:end])
            )
            pos = end
        return d

    def _queue_transfer(self, link: Link, frame: bytes) -> None:
        if not self.connection._can_send:
            return  # nothing may follow our CLOSE [2.4.4]
        if self._waiting or self.remote_incoming_window <= 0:
            self._waiting.append((link, frame, None))
            self.waiting_bytes += len(frame)
            return
        self._spend_outgoing()
        self.connection._out.append(frame)

    def _spend_outgoing(self) -> None:
        self.next_outgoing_id = serial.add(self.next_outgoing_id, 1)
        self.remote_incoming_window -= 1

    def _release_waiting(self) -> None:
        out = self.connection._out
        if not self.connection._can_send:
            self._waiting.clear()
            self.waiting_bytes = 0
            return
        while self._waiting:
            link, frame, held = self._waiting[0]
            if frame is None:  # a held FLOW: the transfers before it are out
                self._waiting.popleft()
                link._send_flow(False, held)
                continue
            if self.remote_incoming_window <= 0:
                break
            self._waiting.popleft()
            self.waiting_bytes -= len(frame)
            self._spend_outgoing()
            out.append(frame)

    def _has_waiting(self, link: Link) -> bool:
        return any(item[0] is link for item in self._waiting)

    def _flush(self) -> None:
        """Called once per connection flush: sends gathered dispositions and
        a window update if one is due."""
        if self._dispositions and not self.end_sent:
            self._send_dispositions()
        if self._flow_due:
            self._send_flow()

    def _send_dispositions(self) -> None:
        runs = self._dispositions
        self._dispositions = []
        if len(runs) > 1:
            base = runs[0][0]
            runs.sort(key=lambda run: serial.diff(run[0], base))  # stable: one id's states keep their order
        current = runs[0]
        for run in runs[1:]:
            if run[0] == (current[1] + 1) & serial.MASK and run[2:] == current[2:]:
                current = [current[0], run[1], *current[2:]]
                continue
            self._disposition_range(current)
            current = run
        self._disposition_range(current)

    def _disposition_range(self, run: list) -> None:
        first, last, role, settled, state = run
        self._send(
            Disposition(
                role=role,
                first=first,
                last=last if last != first else None,
                settled=settled,
                state=state,
            )
        )

    def _free_handle(self) -> int:
        handle = 0
        while handle in self.links:
            handle += 1
        if handle > min(self.handle_max, self.remote_handle_max):
            raise LocalProtocolError("no free link handle below handle-max")
        return handle

    def _link_detach_sent(self, link: Link) -> list[Delivery]:
        """Our DETACH went out: its unsettled outgoing deliveries are over."""
        unsettled = [d for d in self.outgoing_unsettled.values() if d.link is link]
        for d in unsettled:
            del self.outgoing_unsettled[d.id]
        if self._waiting:
            # its held transfers must not follow the DETACH onto an unattached
            # handle; their deliveries are among `unsettled` (or were pre-settled)
            self._waiting = deque(item for item in self._waiting if item[0] is not link)
            self.waiting_bytes = sum(len(frame) for _, frame, _ in self._waiting if frame is not None)
        self._forget_link_if_done(link)
        link.unsettled_at_detach = unsettled
        return unsettled

    def _forget_link_if_done(self, link: Link) -> None:
        if link.detach_sent and (link.detach_received or not link.attach_received):
            self.links.pop(link.handle, None)
            if link.remote_handle is not None and self.remote_links.get(link.remote_handle) is link:
                del self.remote_links[link.remote_handle]

__all__ = ["Session", "RECEIVER", "SENDER"]
