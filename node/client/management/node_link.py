"""The management link pair on a session (REFERENCE.md, addressing and
management; OASIS AMQP Link Pair CS 01).

A client attaches a sender (requests) and a receiver (replies) to the
address `/management`, both with the same link name and the link property
`paired` = true; the two halves find each other by session and name, and
either may attach first. Requests are handled one at a time, in order, by
node/client/management/request.py; each reply goes back on the paired receiver,
settled, with `correlation-id` = the request's `message-id` and the status
code in `subject`.

Flow control both ways, as RabbitMQ does: the client gets 8 request
credits, topped up when half are used. A reply goes out only within the
credit the client grants on its receiving link; until then it waits here
(RabbitMQ would end the session instead, but the Python client sends its
request before it grants the credit for the answer). While replies wait,
no new request credit is granted, so at most a few replies are ever held.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING, Any

from amqp import codec
from amqp import definitions as d
from amqp.errors import AMQPError, Condition, DecodeError
from amqp.message import Message
from node.client.management import request
from node.tasks import BackgroundTasks

if TYPE_CHECKING:
    from node.client.connection import ConnectionHandler

log = logging.getLogger("warren.management")

ADDRESS = "/management"
REQUEST_CREDIT = 8  # RabbitMQ's MAX_MANAGEMENT_LINK_CREDIT
MAX_WAITING_REPLIES = REQUEST_CREDIT  # no new request credit beyond this
REPLY_TO = "$me"  # Link Pair CS 01 [2.1]: the reply goes on the paired link
_ACCEPTED = d.Accepted()
_HTTP_RESPONSE = {"http:response": "1.1"}


def is_management(link: Any, attach: Any) -> bool:
    """Whether an ATTACH names the management node: the client's sender
    targets it, the client's receiver has it as source."""
    terminus = attach.source if link.is_sender else attach.target
    return getattr(terminus, "address", None) == ADDRESS


class LinkPair:
    """The two halves of one management link pair; either may be missing
    while the client attaches or detaches them. The pair owns the task that
    serves its requests: it stops once both halves are gone."""

    __slots__ = ("key", "requests", "replies", "waiting", "incoming", "serving", "server")

    def __init__(self, key: tuple[int, str], loop: asyncio.AbstractEventLoop):
        self.key = key
        self.requests: RequestLink | None = None
        self.replies: ReplyLink | None = None
        self.waiting: deque[bytes] = deque()  # encoded replies held for credit
        # Requests not yet answered, served one at a time and in order (a
        # change waits for the metadata store to commit it).
        self.incoming: deque[bytes] = deque()
        self.serving = False
        self.server = BackgroundTasks(loop, log)  # the task serving `incoming` while `serving`


class ManagementLink:
    """Base of the link contexts of a pair's halves."""

    def __init__(self, handler: ConnectionHandler, pair: LinkPair, link: Any):
        self.handler = handler
        self.pair = pair
        self.link = link

    @property
    def open(self) -> bool:
        link = self.link
        return not (link.detach_sent or link.detach_received)

    def detached(self) -> None:
        pair = self.pair
        if pair.requests is self:
            pair.requests = None
        elif pair.replies is self:
            pair.replies = None
            pair.waiting.clear()  # nobody left to read them
        pairs = self.handler.management_pairs
        if pair.requests is None and pair.replies is None:
            pair.server.cancel()  # nobody left to ask or to read the answers
            if pairs is not None:
                pairs.pop(pair.key, None)


class RequestLink(ManagementLink):
    """Our receiving half: the client's requests."""

    def on_message(self, delivery: Any) -> None:
        link = self.link
        if not delivery.settled:
            link.session.settle(delivery, _ACCEPTED)
        replies = self.pair.replies
        if replies is None or not replies.open:
            link.detach(closed=True, condition=Condition.PRECONDITION_FAILED,
                        description="received transfer on half open management link pair")  # fmt: skip
            self.handler._link_gone(link)
            self.handler.schedule_flush()
            return
        pair = self.pair
        pair.incoming.append(delivery.payload)
        if not pair.serving:
            pair.serving = True
            pair.server.spawn(self._serve_all(), f"serving management requests on link pair '{self.link.name}'")
        self.top_up()

    async def _serve_all(self) -> None:
        pair = self.pair
        try:
            while pair.incoming:
                answer = await self._serve(pair.incoming[0])
                pair.incoming.popleft()
                if pair.replies is None:
                    pair.incoming.clear()  # nobody left to read the answers
                    return
                pair.waiting.append(answer)
                pair.replies.send_waiting()
                self.top_up()
        finally:
            pair.serving = False

    async def _serve(self, payload: bytes) -> bytes:
        message_id = None
        try:
            msg = request_message(payload)
            message_id = msg.message_id
            method, target, reply_to, body = msg.subject, msg.to, msg.reply_to, msg.body
        except AMQPError as e:
            return reply(message_id, request.BAD_REQUEST, f"malformed request: {e.description or e.condition}")
        if reply_to != REPLY_TO:
            return reply(message_id, request.BAD_REQUEST, f"reply-to must be '{REPLY_TO}', got {reply_to!r}")
        status, answer = await request.handle(self.caller(), method, target, body)
        return reply(message_id, status, answer)

    def caller(self) -> request.Caller:
        h = self.handler
        vhost = h.vhost
        names = h.node.node_names
        return request.Caller(vhost, h.user, h.permission(vhost.name), h, h.node.config.node_name, h.node.projections,
                              h.node.volatile, names.name_of if names is not None else str)  # fmt: skip

    def top_up(self) -> None:
        """Grants request credit again once half is used, unless replies
        wait for the client's credit."""
        link = self.link
        if not self.open:
            return
        if link.link_credit <= REQUEST_CREDIT // 2 and len(self.pair.waiting) + len(self.pair.incoming) < MAX_WAITING_REPLIES:
            link.flow(link_credit=REQUEST_CREDIT)
            self.handler.schedule_flush()


class ReplyLink(ManagementLink):
    """Our sending half: replies, within the client's credit."""

    def send_waiting(self) -> bool:
        """Sends what the credit allows; True if that answered a drain with
        a FLOW already."""
        link, waiting = self.link, self.pair.waiting
        if not self.open:
            return False
        while waiting and link.link_credit > 0:
            link.send(b"", waiting.popleft(), settled=True)
        self.handler.schedule_flush()
        if link.drain and not waiting and link.link_credit > 0:
            link.drained()  # [2.6.7] nothing more to send: use up the credit
            return True
        return False

    def on_flow(self, drain: bool, echo: bool) -> None:
        if not self.send_waiting() and echo and self.open:
            self.link.flow()  # report our state as asked [2.7.4]
        if self.pair.requests is not None:
            self.pair.requests.top_up()


_RANK = {cls: rank for rank, cls in enumerate(d.SECTIONS)}  # the order of a message's sections [3.2]


def request_message(payload: bytes) -> Message:
    """A request, its sections in any order. RabbitMQ reads a request's
    properties and amqp-value wherever they are, and the Python client's
    proton puts a null body (GET, DELETE) before the properties; such
    sections are put back in order before decoding."""
    try:
        return Message.from_bytes(payload)
    except DecodeError:
        spans = []
        pos = 0
        while pos < len(payload):
            start = pos
            section, pos = codec.decode(payload, pos)
            rank = _RANK.get(type(section))
            if rank is None:
                raise DecodeError(f"not a message section at byte {start}") from None
            spans.append((rank, start, pos))
        spans.sort(key=lambda span: span[0])  # stable: body sections keep their order
        return Message.from_bytes(b"".join(payload[a:b] for _, a, b in spans))


def reply(message_id: Any, status: str, body: Any) -> bytes:
    """An encoded reply: the status in `subject`, the request's id in
    `correlation-id`, the body an amqp-value (HTTP over AMQP WD 06 [5.1])."""
    return Message.build(
        body,
        properties={"correlation_id": message_id, "subject": status},
        application_properties=_HTTP_RESPONSE,
        body_kind="value",
    ).payload


def attach(handler: ConnectionHandler, link: Any, attach: Any) -> None:
    """Answers an ATTACH to the management node, pairing it by name with
    the other half on the same session."""
    props = attach.properties or {}
    if props.get("paired") is not True:
        link.refuse(Condition.PRECONDITION_FAILED, "a management link needs the link property 'paired' = true")
        return
    if handler.management_pairs is None:
        handler.management_pairs = {}
    key = (id(link.session), link.name)
    pair = handler.management_pairs.get(key) or LinkPair(key, handler.node.loop)
    half = pair.replies if link.is_sender else pair.requests
    if half is not None:
        link.refuse(Condition.PRECONDITION_FAILED,
                    f"management link pair '{link.name}' already has its {'receiver' if link.is_sender else 'sender'}")  # fmt: skip
        return
    context: ManagementLink
    if link.is_sender:
        link.attach(source=attach.source, target=attach.target, snd_settle_mode=d.SND_SETTLED,
                    rcv_settle_mode=attach.rcv_settle_mode, initial_delivery_count=0,
                    properties=attach.properties)  # fmt: skip
        context = pair.replies = ReplyLink(handler, pair, link)
    else:
        max_size = handler.node.config.max_message_size
        link.max_message_size = max_size
        link.attach(source=attach.source, target=attach.target, snd_settle_mode=attach.snd_settle_mode,
                    rcv_settle_mode=d.RCV_FIRST, max_message_size=max_size, properties=attach.properties)  # fmt: skip
        context = pair.requests = RequestLink(handler, pair, link)
        link.flow(link_credit=REQUEST_CREDIT)
    handler.management_pairs[key] = pair
    link.context = context
    handler.node.metrics.links += 1
