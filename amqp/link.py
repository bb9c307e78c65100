"""Link endpoints [2.6]: attach/detach, flow state and deliveries.

A link is owned by its session. Flow state uses the spec's names: for a
sender, `link_credit` is what it may still send; for a receiver, what it has
granted. `delivery_count` advances by one per delivery, in serial arithmetic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import serial
from .definitions import RCV_FIRST, RCV_SECOND, RECEIVER, SENDER, Attach, Detach, Flow
from .errors import Condition, LinkError, LocalProtocolError
from .events import Delivery
from .framing import bounded_error

if TYPE_CHECKING:
    from .session import Session


class Link:
    # Slots: a broker holds one per link, 100,000 idle Direct Reply-To links
    # among them; 31 attributes overflow a shared-key __dict__ (~1.6 KB a link); in slots
    # they take ~0.3 KB. `__dict__` stays for what an application hangs on a link.
    __slots__ = (
        "session", "name", "handle", "remote_handle", "role", "source", "target", "remote_source", "remote_target",
        "snd_settle_mode", "rcv_settle_mode", "max_message_size", "remote_max_message_size", "properties",
        "remote_properties", "delivery_count", "_initial_delivery_count", "link_credit", "_credit_limit",
        "available", "drain", "attach_sent", "attach_received", "detach_sent", "detach_received", "incoming",
        "_incoming_chunks", "_incoming_size", "unsettled_at_detach", "context", "__dict__",
    )  # fmt: skip

    def __init__(self, session: Session, name: str, handle: int, role: bool):
        self.session = session
        self.name = name
        self.handle = handle  # our handle
        self.remote_handle: int | None = None
        self.role = role  # our role: SENDER (False) or RECEIVER (True)
        self.source: Any = None
        self.target: Any = None
        self.remote_source: Any = None
        self.remote_target: Any = None
        self.snd_settle_mode = 2
        self.rcv_settle_mode = 0
        self.max_message_size = 0  # ours; 0 = unlimited
        self.remote_max_message_size = 0
        self.properties: dict | None = None
        self.remote_properties: dict | None = None
        self.delivery_count = 0
        self._initial_delivery_count = 0  # a sender's, set by attach(); a FLOW may come before it
        self.link_credit = 0
        # Receiver: the highest delivery-limit (delivery-count + link-credit)
        # we ever granted. Transfers below it may be in flight from before a
        # grant that lowered the credit; [2.6.7] lets us take them normally.
        self._credit_limit: int | None = None
        self.available = 0
        self.drain = False
        self.attach_sent = False
        self.attach_received = False
        self.detach_sent = False
        self.detach_received = False
        self.incoming: Delivery | None = None  # a multi-frame delivery being assembled
        self._incoming_chunks: list[bytes] | tuple = ()  # a list once a delivery starts (none per idle link)
        self._incoming_size = 0
        self.unsettled_at_detach: list[Delivery] | tuple = ()  # set by the session when our DETACH goes out
        self.context: Any = None  # the application's object for this link

    @property
    def is_sender(self) -> bool:
        return self.role == SENDER

    @property
    def active(self) -> bool:
        """Attached both ways, not detached, and its session not ending: the
        link may carry transfers."""
        return (
            self.attach_sent and self.attach_received and not (self.detach_sent or self.detach_received)
            and not self.session.end_sent and self.session.connection.can_send
        )  # fmt: skip

    # ----------------------------------------------------------- outgoing frames

    def attach(
        self,
        source: Any = None,
        target: Any = None,
        snd_settle_mode: int | None = None,
        rcv_settle_mode: int | None = None,
        initial_delivery_count: int = 0,
        max_message_size: int | None = None,
        properties: dict | None = None,
        offered_capabilities: list | None = None,
        desired_capabilities: list | None = None,
    ) -> None:
        if self.attach_sent:
            if self.detach_sent:
                return  # the engine already refused it (a LinkAttached read in the same batch)
            raise LocalProtocolError("link already attached")
        self.source, self.target = source, target
        if snd_settle_mode is not None:
            self.snd_settle_mode = snd_settle_mode
        if rcv_settle_mode is not None:
            self.rcv_settle_mode = rcv_settle_mode
        if max_message_size:
            self.max_message_size = max_message_size
        if self.is_sender:
            self.delivery_count = self._initial_delivery_count = initial_delivery_count
        self.properties = properties
        self.attach_sent = True
        self.session.send(
            Attach(
                name=self.name,
                handle=self.handle,
                role=self.role,
                snd_settle_mode=self.snd_settle_mode,
                rcv_settle_mode=self.rcv_settle_mode,
                source=source,
                target=target,
                # [2.7.3] set by the sender only
                initial_delivery_count=initial_delivery_count if self.is_sender else None,
                max_message_size=self.max_message_size or None,  # also when set on the link beforehand
                offered_capabilities=offered_capabilities,
                desired_capabilities=desired_capabilities,
                properties=properties,
            )
        )

    def refuse(self, condition: str, description: str | None = None) -> None:
        """Answers a peer's ATTACH with a null terminus and a closing DETACH,
        the spec's way to refuse a link [2.6.3]."""
        if not self.attach_sent:
            self.attach(
                snd_settle_mode=self.snd_settle_mode,
                rcv_settle_mode=self.rcv_settle_mode,
            )
        self.detach(closed=True, condition=condition, description=description)

    def detach(
        self, closed: bool = True, condition: str | None = None, description: str | None = None
    ) -> list[Delivery]:
        """Sends DETACH; returns the deliveries we sent that were never settled."""
        if self.detach_sent:
            return []
        if not self.attach_sent and self.attach_received:
            # the peer attached and we never answered: the DETACH needs our
            # ATTACH before it, with null termini as in a refusal [2.6.3]
            self.attach()
        self.detach_sent = True
        error = bounded_error(condition, description) if condition else None
        if self.attach_sent:
            self.session.send(Detach(handle=self.handle, closed=closed, error=error))
        return self.session.link_detach_sent(self)

    def flow(self, link_credit: int | None = None, drain: bool | None = None, echo: bool = False) -> None:
        """Receiver: grants `link_credit` (replacing what was granted).
        Sender: reports its state (e.g. after draining). Either way one FLOW."""
        if link_credit is not None:
            if self.is_sender:
                raise LocalProtocolError("a sender does not grant credit")
            self.link_credit = link_credit
            self._raise_credit_limit()
        if drain is not None:
            self.drain = drain
        self.send_flow(echo)

    def drained(self) -> None:
        """Sender with nothing more to send under drain: use up the credit
        [2.6.7] and tell the receiver."""
        if not self.is_sender:
            raise LocalProtocolError("only a sender drains")
        self.delivery_count = serial.add(self.delivery_count, self.link_credit)
        self.link_credit = 0
        self.send_flow(False)

    def send(
        self, tag: bytes, payload: bytes, settled: bool = False, message_format: int = 0, state: Any = None,
        *, beyond_credit: bool = False,
    ) -> Delivery:
        """Sends one message; the caller checks `link_credit` first.

        `beyond_credit`: the sender (a replicated queue) granted this delivery
        under credit the receiver has taken back since, in a FLOW that crossed
        it. [2.6.7] counts such a transfer against the new credit, which goes
        below zero until the receiver's next FLOW sets it again."""
        if not self.is_sender:
            raise LocalProtocolError("a receiving link cannot send")
        if self.link_credit <= 0 and not beyond_credit:
            raise LocalProtocolError(f"link {self.name!r} has no credit")
        if self.detach_sent or self.detach_received or self.session.end_sent:
            raise LocalProtocolError("link is detached")
        self.link_credit -= 1
        self.delivery_count = serial.add(self.delivery_count, 1)
        return self.session.send_delivery(self, tag, payload, settled, message_format, state)

    # ----------------------------------------------------------- the engine's own interface
    # (the session calls these; applications use the methods above)

    def send_flow(self, echo: bool, held: tuple | None = None) -> None:
        """Sends this link's FLOW. `held`: the link state of a FLOW that waited
        behind this link's transfers (Session.hold_flow), as it was when asked for."""
        if self.detach_sent:
            return
        s = self.session
        state = held or (self.delivery_count, self.link_credit, self.available, self.drain, echo)
        if held is None and self.is_sender and s.hold_flow(self, state):
            # its delivery-count counts transfers still held by the session
            # window: it goes out after them, with the state of this moment
            return
        delivery_count, link_credit, available, drain, echo = state
        self.session.send(
            Flow(
                next_incoming_id=s.next_incoming_id if s.remote_begun else None,
                incoming_window=s.advertise_window(),
                next_outgoing_id=s.next_outgoing_id,
                outgoing_window=s.outgoing_window,
                handle=self.handle,
                # a receiver that has not seen the sender's attach leaves it unset [2.7.4]
                delivery_count=delivery_count if (self.is_sender or self.attach_received) else None,
                link_credit=link_credit,
                available=available if self.is_sender else None,
                drain=drain,
                echo=echo,
            )
        )

    def on_attach(self, a: Any) -> None:
        """The peer's ATTACH for this link [2.6.3]."""
        self.remote_handle = a.handle
        self.attach_received = True
        self.remote_source, self.remote_target = a.source, a.target
        self.remote_max_message_size = a.max_message_size or 0
        self.remote_properties = a.properties
        if a.role == SENDER and a.initial_delivery_count is not None:
            self.delivery_count = a.initial_delivery_count
            # credit granted before the sender's ATTACH counts from its initial delivery-count
            self._credit_limit = None
            self._raise_credit_limit()

    def on_transfer(self, t: Any, payload: bytes) -> Delivery | None:
        """Assembles deliveries; returns the Delivery when complete, or the
        aborted delivery (with `payload` empty) when the sender aborted."""
        if self.is_sender:
            raise LinkError(Condition.NOT_ALLOWED, "transfer received on a sending link")
        d = self.incoming
        if (d is None and self.link_credit > 0 and not t.more and t.rcv_settle_mode is None and not t.aborted
                and t.delivery_id is not None and t.delivery_tag is not None
                and (not self.max_message_size or len(payload) <= self.max_message_size)):  # fmt: skip
            # the usual case, a whole message in one frame under credit: what the
            # general path below does for it, without assembling chunks
            self.link_credit -= 1
            self.delivery_count = serial.add(self.delivery_count, 1)
            return Delivery(t.delivery_id, t.delivery_tag, self, bool(t.settled), payload, t.message_format or 0,
                            t.state)  # fmt: skip
        if d is None:
            if t.delivery_id is None or t.delivery_tag is None:
                # [2.7.5] both MUST be set on the first transfer of a delivery
                raise LinkError(
                    Condition.INVALID_FIELD, "first transfer of a delivery without delivery-id or tag"
                )
            if self.link_credit > 0:
                self.link_credit -= 1
                self.delivery_count = serial.add(self.delivery_count, 1)
            elif self._credit_limit is None or not serial.lt(self.delivery_count, self._credit_limit):
                raise LinkError(Condition.TRANSFER_LIMIT_EXCEEDED, "transfer beyond the granted link credit")
            else:  # sent under an earlier, larger grant [2.6.7], before our FLOW lowering it arrived
                self.delivery_count = serial.add(self.delivery_count, 1)
                # That FLOW counted one delivery fewer than the sender had sent, so the sender
                # computed its credit below zero, which Qpid Proton takes for credit to spare:
                # this one, counting the transfer, sets the sender's credit to ours again.
                self.send_flow(False)
            d = Delivery(
                id=t.delivery_id,
                tag=t.delivery_tag,
                link=self,
                settled=bool(t.settled),
                message_format=t.message_format or 0,
                state=t.state,
            )
            self._incoming_chunks = []
            self._incoming_size = 0
        elif t.delivery_id is not None and t.delivery_id != d.id:
            raise LinkError(Condition.INVALID_FIELD, "continuation transfer for another delivery-id")
        if t.settled:
            d.settled = True
        if t.rcv_settle_mode == RCV_SECOND and self.rcv_settle_mode == RCV_FIRST and not d.settled:
            # [2.7.5] "If the negotiated link value is first, then it is illegal to
            # set this field to second"; the condition is RabbitMQ 4's
            self.incoming = None
            raise LinkError(Condition.NOT_IMPLEMENTED, "rcv-settle-mode second not supported")
        if t.aborted:
            self.incoming = None
            self._incoming_chunks = []
            d.settled = True
            return d
        if payload:
            self._incoming_size += len(payload)
            if self.max_message_size and self._incoming_size > self.max_message_size:
                self.incoming = None
                self._incoming_chunks = []
                raise LinkError(
                    Condition.MESSAGE_SIZE_EXCEEDED,
                    f"message exceeds max-message-size {self.max_message_size}",
                )
            self._incoming_chunks.append(payload)
        if t.more:
            self.incoming = d
            return None
        self.incoming = None
        chunks = self._incoming_chunks
        d.payload = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self._incoming_chunks = []
        return d

    def on_flow(self, f: Any) -> None:
        if self.is_sender:
            # [2.6.7] link-credit(snd) = delivery-count(rcv) + link-credit(rcv) - delivery-count(snd)
            rcv_count = f.delivery_count if f.delivery_count is not None else self._initial_delivery_count
            credit = f.link_credit if f.link_credit is not None else 0
            # computed as credit minus what is in flight, not as a serial
            # difference: a grant above 2^31 must not read as negative
            in_flight = max(0, serial.diff(self.delivery_count, rcv_count))
            self.link_credit = max(0, credit - in_flight)
            self.drain = f.drain
        else:
            if f.delivery_count is not None:
                self._clamp_receiver_credit(f.delivery_count)
            if f.available is not None:
                self.available = f.available
            self.drain = f.drain

    def _clamp_receiver_credit(self, sender_count: int) -> None:
        # The sender's delivery-count may be ahead of ours when it drained or
        # dropped deliveries: the credit it used up that way is gone. The
        # link-credit in its FLOW is not used: it may predate a grant of ours
        # still in flight, and trusting it would count transfers sent under
        # that grant as a credit violation [2.6.7].
        used = serial.diff(sender_count, self.delivery_count)
        if used > 0:
            self.link_credit = max(0, self.link_credit - used)
            self.delivery_count = sender_count

    def _raise_credit_limit(self) -> None:
        limit = serial.add(self.delivery_count, self.link_credit)
        if self._credit_limit is None or serial.lt(self._credit_limit, limit):
            self._credit_limit = limit


ROLE_NAMES = {SENDER: "sender", RECEIVER: "receiver"}
