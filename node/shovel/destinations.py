"""Where a shovel's copies go (node/shovel/runner.py's `_Transfer` sends through one).

- `AmqpDestination`: a sender link on an AMQP 1.0 connection (an amqp10 destination); its
  credit is the link's, and a copy's outcome is the state the peer settles it with.
- `DirectDestination`: a queue of this node (a local destination), handed the copies
  directly (node/client/direct.py, through the node's port): the node is spared encoding,
  sending, reading and decoding each copy on a connection to itself, with the same checks
  and outcomes as a client's link to /queues/NAME.

Both take `on_credit()` (sending may go on) and `on_failed(error)` (the destination is
gone: the shovel reconnects), and `send(tag, payload, message_format, done)`, where `done`
is called with the copy's delivery state, or is None for a copy sent settled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from amqp import events as ev
from node.shovel.amqp_client import AmqpClient, ClientError

__all__ = ["AmqpDestination", "DirectDestination", "DirectOpener"]

Done = Callable[[Any], None]


class DirectOpener(Protocol):
    """The node's direct publishing (node/client/direct.py's open_direct, ClientError for a refusal)."""

    async def __call__(self, user: str | None, password: str, vhost: str, queue: str,
                       on_credit: Callable[[], None], on_end: Callable[[str], None]) -> Any: ...  # fmt: skip


class AmqpDestination:
    def __init__(self, client: AmqpClient) -> None:
        self.client = client
        self.link: Any = None
        self.copies: dict[int, Done] = {}  # delivery id -> what to call once the peer settles it

    async def attach(self, name: str, address: str, on_credit: Callable[[], None],
                     on_failed: Callable[[BaseException], None]) -> None:  # fmt: skip
        self.on_credit, self.on_failed = on_credit, on_failed
        self.client.on_event = self._on_event
        self.link = await self.client.sender(name, address)

    @property
    def credit(self) -> int:
        return self.link.link_credit

    def send(self, tag: bytes, payload: bytes, message_format: int, done: Done | None) -> None:
        copy = self.link.send(tag, payload, settled=done is None, message_format=message_format)
        if done is not None:
            self.copies[copy.id] = done

    def flush(self) -> None:
        self.client.flush_soon()

    async def close(self) -> None:
        await self.client.close()

    def _on_event(self, event: Any) -> None:
        kind = type(event)
        if kind is ev.LinkFlow and event.link is self.link:
            self.on_credit()
        elif kind is ev.DeliveriesUpdated:
            for copy in event.deliveries:
                if copy.link is self.link and copy.remote_settled:
                    done = self.copies.pop(copy.id, None)
                    if done is not None:
                        done(copy.state)
        elif kind is ev.LinkDetached and event.link is self.link:
            self.on_failed(ClientError(f"the destination detached: {event.error}"))
        elif kind is ev.SessionEnded or kind is ev.ConnectionClosed:
            self.on_failed(ClientError(self.client.closed or f"the destination ended the session: {event.error}"))


class DirectDestination:
    def __init__(self, opener: DirectOpener, user: str | None, password: str, vhost: str, queue: str) -> None:
        self.opener, self.user, self.password, self.vhost, self.queue = opener, user, password, vhost, queue
        self.publisher: Any = None

    async def attach(self, name: str, address: str, on_credit: Callable[[], None],
                     on_failed: Callable[[BaseException], None]) -> None:  # fmt: skip
        self.publisher = await self.opener(self.user, self.password, self.vhost, self.queue, on_credit,
                                           lambda why: on_failed(ClientError(why)))  # fmt: skip

    @property
    def credit(self) -> int:
        return self.publisher.credit

    def send(self, tag: bytes, payload: bytes, message_format: int, done: Done | None) -> None:
        self.publisher.publish(payload, done)

    def flush(self) -> None:
        pass  # nothing is written

    async def close(self) -> None:
        if self.publisher is not None:
            self.publisher.close()
