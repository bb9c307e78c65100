"""The asyncio AMQP 1.0 client bench/rpc.py drives: Warren's own engine
(amqp/, client role) over real sockets, one event loop for every
connection, so that thousands of requesters cost one Python process.

`Client` opens a connection (SASL PLAIN, OPEN), begins sessions and attaches
links; a link's `on_message(payload)` and `on_credit()` callbacks are set by
whoever uses it. Nothing here sleeps: every step awaits the broker's frame.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from amqp import definitions as d  # noqa: E402
from amqp import events as ev  # noqa: E402
from amqp.connection import CLIENT, Connection  # noqa: E402
from amqp.types import Symbol  # noqa: E402

VOLATILE = [Symbol("rabbitmq:volatile-queue")]
LINK_DETACH = Symbol("link-detach")


class Client(asyncio.Protocol):
    def __init__(self, user: str, password: str, hostname: str | None) -> None:
        self.engine = Connection(CLIENT, container_id="rpc-bench")
        self.user, self.password, self.hostname = user, password, hostname
        self.transport: asyncio.Transport | None = None
        self.opened: asyncio.Future = asyncio.get_running_loop().create_future()
        self._waiters: dict[Any, asyncio.Future] = {}  # session or link -> its BEGIN/ATTACH answer
        self._flush_pending = False
        self.closed = False

    @classmethod
    async def connect(cls, port: int, user: str = "guest", password: str = "guest",
                      hostname: str | None = None) -> Client:  # fmt: skip
        loop = asyncio.get_running_loop()
        _, client = await loop.create_connection(lambda: cls(user, password, hostname), "127.0.0.1", port)
        await client.opened
        return client

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.engine.start(sasl=True)
        self.flush()

    def data_received(self, data: bytes) -> None:
        for event in self.engine.receive_data(data):
            self._dispatch(event)
        self.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self.opened.done():
            self.opened.set_exception(ConnectionError(f"connection lost: {exc}"))
        for fut in self._waiters.values():
            if not fut.done():
                fut.set_exception(ConnectionError("connection lost"))

    # -- engine --------------------------------------------------------------------------

    def flush(self) -> None:
        data = self.engine.data_to_send()
        if data and self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def flush_soon(self) -> None:
        """Many sends in one loop turn go out in one write."""
        if not self._flush_pending:
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self._flush_now)

    def _flush_now(self) -> None:
        self._flush_pending = False
        self.flush()

    def _dispatch(self, e: Any) -> None:
        kind = type(e)
        if kind is ev.MessageReceived:
            e.link.on_message(e.delivery.payload)
        elif kind is ev.LinkFlow:
            callback = getattr(e.link, "on_credit", None)
            if callback is not None:
                callback()
        elif kind is ev.SaslMechanismsReceived:
            self.engine.sasl_init("PLAIN", f"\0{self.user}\0{self.password}".encode())
        elif kind is ev.SaslOutcomeReceived:
            self.engine.open(hostname=self.hostname)
        elif kind is ev.ConnectionOpened:
            if not self.opened.done():
                self.opened.set_result(e.open)
        elif kind is ev.SessionBegun:
            self._answer(e.session, e.session)
        elif kind is ev.LinkAttached:
            self._answer(e.link, e.attach)
        elif kind is ev.LinkDetached:
            fut = self._waiters.pop(e.link, None)
            if fut is not None and not fut.done():
                fut.set_exception(ConnectionError(f"link refused: {getattr(e, 'error', None)}"))
        elif kind is ev.ConnectionClosed:
            self.closed = True

    def _answer(self, key: Any, value: Any) -> None:
        fut = self._waiters.pop(key, None)
        if fut is not None and not fut.done():
            fut.set_result(value)

    def _expect(self, key: Any) -> asyncio.Future:
        fut = self._waiters[key] = asyncio.get_running_loop().create_future()
        return fut

    # -- steps ---------------------------------------------------------------------------

    async def session(self) -> Any:
        session = self.engine.create_session()
        fut = self._expect(session)
        session.begin(incoming_window=100_000)
        self.flush()
        await fut
        return session

    async def sender(self, session: Any, address: str | None, name: str) -> Any:
        link = session.create_link(name, d.SENDER)
        link.on_credit = None
        fut = self._expect(link)
        link.attach(source=d.Source(), target=d.Target(address=address), snd_settle_mode=d.SND_SETTLED)
        self.flush()
        await fut
        return link

    async def receiver(self, session: Any, address: str | None, name: str, on_message: Callable[[bytes], None],
                       credit: int, volatile: bool = False) -> tuple[Any, str]:  # fmt: skip
        """A pre-settled receiver; `address` None with `volatile`: Direct
        Reply-To. Returns the link and the address the broker answered with."""
        link = session.create_link(name, d.RECEIVER)
        link.on_message = on_message
        fut = self._expect(link)
        if volatile:
            source = d.Source(dynamic=True, expiry_policy=LINK_DETACH, capabilities=VOLATILE)
        else:
            source = d.Source(address=address)
        link.attach(source=source, target=d.Target(), snd_settle_mode=d.SND_SETTLED)
        self.flush()
        attach = await fut
        if credit:
            link.flow(link_credit=credit)
            self.flush()
        return link, attach.source.address

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
