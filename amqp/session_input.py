"""A session's handling of the frames its peer sends [2.5]: BEGIN, ATTACH, DETACH,
TRANSFER, FLOW, DISPOSITION and END, each turned into state changes and events."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import serial
from .definitions import RECEIVER, SENDER, Attach, Detach, Disposition, End, Flow, Transfer
from .errors import AMQPError, Condition, LinkError, SessionError
from .events import (
    DeliveriesUpdated,
    DeliveryAborted,
    LinkAttached,
    LinkDetached,
    LinkFlow,
    MessageReceived,
    SessionEnded,
)
from .framing import bounded_error
from .link import Link

if TYPE_CHECKING:
    pass


class SessionInput:
    """The input half of `Session` (amqp/session.py), which owns the state it changes."""

    # ----------------------------------------------------------- internals: input

    def _on_begin(self, b: Any) -> None:
        self.remote_begun = True
        self.next_incoming_id = b.next_outgoing_id
        self.remote_incoming_window = b.incoming_window
        self.remote_outgoing_window = b.outgoing_window
        self.remote_handle_max = b.handle_max

    def _on_frame(self, p: Any, payload: bytes) -> list:
        kind = type(p)
        if kind is Transfer:
            return self._on_transfer(p, payload)
        if kind is Disposition:
            return self._on_disposition(p)
        if kind is Flow:
            return self._on_flow(p)
        if kind is Attach:
            return self._on_attach(p)
        if kind is Detach:
            return self._on_detach(p)
        if kind is End:
            return self._on_end(p)
        raise AMQPError(Condition.NOT_ALLOWED, f"{kind.__name__} is not allowed on a session channel")

    def _remote_link(self, handle: int) -> Link:
        link = self.remote_links.get(handle)
        if link is None:
            raise SessionError(Condition.UNATTACHED_HANDLE, f"no link attached on handle {handle}")
        return link

    def _on_attach(self, a: Any) -> list:
        if a.handle > self.handle_max:
            raise AMQPError(
                Condition.FRAMING_ERROR, f"link handle {a.handle} exceeds handle-max {self.handle_max}"
            )
        if a.handle in self.remote_links:
            raise SessionError(Condition.HANDLE_IN_USE, f"handle {a.handle} is already in use")
        link = None
        for candidate in self.links.values():
            if candidate.name == a.name and candidate.attach_sent and not candidate.attach_received:
                link = candidate
                break
        if link is None:
            link = Link(self, a.name, self._free_handle(), not a.role)
            link.snd_settle_mode, link.rcv_settle_mode = a.snd_settle_mode, a.rcv_settle_mode
            self.links[link.handle] = link
        elif link.role == a.role:
            raise SessionError(Condition.NOT_ALLOWED, f"both ends of link {a.name!r} have the same role")
        link.remote_handle = a.handle
        link.attach_received = True
        link.remote_source, link.remote_target = a.source, a.target
        link.remote_max_message_size = a.max_message_size or 0
        link.remote_properties = a.properties
        self.remote_links[a.handle] = link
        if a.role == SENDER:
            if a.initial_delivery_count is None:
                link.refuse(Condition.INVALID_FIELD, "a sender's attach must carry initial-delivery-count")
                return []
            link.delivery_count = a.initial_delivery_count
            # credit granted before the sender's ATTACH counts from its initial delivery-count
            link._credit_limit = None
            link._raise_credit_limit()
        if link.detach_sent:  # we refused before the reply came
            self._forget_link_if_done(link)
            return []
        return [LinkAttached(link, a)]

    def _on_detach(self, d: Any) -> list:
        link = self._remote_link(d.handle)
        link.detach_received = True
        unsettled = [] if link.detach_sent else link.detach(closed=d.closed)
        self._forget_link_if_done(link)
        return [LinkDetached(link, d.error, d.closed, True, unsettled)]

    def _on_transfer(self, t: Any, payload: bytes) -> list:
        if self.incoming_window <= 0:
            raise SessionError(Condition.WINDOW_VIOLATION, "transfer beyond the session incoming-window")
        self.next_incoming_id = serial.add(self.next_incoming_id, 1)
        self.incoming_window -= 1
        if self.remote_outgoing_window > 0:
            self.remote_outgoing_window -= 1
        if not self.blocked and self.incoming_window <= self.incoming_window_max // 2:
            self._flow_due = True  # the FLOW, when sent, refills the window
        link = self._remote_link(t.handle)
        if link.detach_sent:
            return []  # frames for a link we detached are dropped [2.6.5]
        try:
            d = link._on_transfer(t, payload)
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
                self._send_flow()
            return []
        link = self._remote_link(f.handle)
        if link.detach_sent:
            return []
        link._on_flow(f)
        if f.echo and not link.is_sender:
            link._send_flow(False)
        return [LinkFlow(link, f.drain, f.echo)]

    def _on_disposition(self, d: Any) -> list:
        # role names the sender of the DISPOSITION: a receiver settles what we sent
        table = self.outgoing_unsettled if d.role == RECEIVER else self.incoming_unsettled
        first = d.first
        last = d.last if d.last is not None else first
        span = (last - first) & serial.MASK
        if span >= serial.HALF:
            raise SessionError(Condition.INVALID_FIELD, "disposition range runs backwards")
        hits = list(table.in_range(first, last))  # O(log n + hits), however wide the range
        changed = []
        for i, delivery in hits:
            delivery.state = d.state
            if d.settled:
                delivery.remote_settled = True
                del table[i]
            changed.append(delivery)
        return [DeliveriesUpdated(self, changed)] if changed else []

    def _on_end(self, e: Any) -> list:
        self.end_received = True
        if not self.end_sent:
            self.end()
        return [SessionEnded(self, e.error, True)]
