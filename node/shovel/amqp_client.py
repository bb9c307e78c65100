"""An AMQP 1.0 client on Warren's own engine (amqp/, client role) over
asyncio streams: what a shovel needs of a peer broker, nothing more.

One connection, one session, links attached on request. A reader task feeds
the engine and hands each event to the owner's `on_event` (the shovel's
transfer logic), then writes what the engine owes the peer; `wait_for`
awaits an event that matches, failing at once when the connection ends.
Heartbeats: the engine's `tick()` is run as its deadlines come.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from amqp import definitions as d
from amqp import events as ev
from amqp.connection import CLIENT, Connection
from node.tasks import BackgroundTasks

__all__ = ["AmqpClient", "ClientError"]

log = logging.getLogger("warren.shovel")
CONNECT_TIMEOUT = 15.0  # seconds for TCP, SASL and OPEN, and for each ATTACH
IDLE_TIMEOUT = 60.0  # what our OPEN asks of the peer: it sends something at least this often


class ClientError(Exception):
    """The connection failed or the peer refused something; the message says what."""


def _error_text(error: Any) -> str:
    if error is None:
        return ""
    return f"{error.condition}: {error.description}" if getattr(error, "description", None) else str(error.condition)


class AmqpClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, container_id: str) -> None:
        self._reader, self._writer = reader, writer
        self.engine = Connection(CLIENT, container_id=container_id, idle_timeout=IDLE_TIMEOUT)
        self.on_event: Callable[[Any], None] = lambda event: None
        self.closed: str | None = None  # why the connection ended, once it has
        self._waiters: list[tuple[Callable[[Any], bool], asyncio.Future]] = []
        self._tasks = BackgroundTasks(asyncio.get_running_loop(), log)
        self.session: Any = None
        self._flush_pending = False

    @classmethod
    async def connect(cls, uri: str, vhost: str | None = None, container_id: str = "warren-shovel",
                      host: str | None = None, port: int | None = None) -> AmqpClient:  # fmt: skip
        """Connects to `uri` (amqp[s]://[user[:password]@]host[:port][/vhost]);
        `host`/`port` override the URI's (a local shovel dials this node),
        `vhost` the path's. SASL PLAIN with the URI's user, else ANONYMOUS."""
        parts = urlsplit(uri)
        tls = parts.scheme == "amqps"
        host = host or parts.hostname or "127.0.0.1"
        port = port or parts.port or (5671 if tls else 5672)
        if vhost is None and len(parts.path) > 1:
            vhost = unquote(parts.path[1:])
        context = ssl.create_default_context() if tls else None
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=context), CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as e:
            raise ClientError(f"cannot connect to {host}:{port}: {e or type(e).__name__}") from None
        client = cls(reader, writer, container_id)
        try:
            await asyncio.wait_for(client._handshake(parts, host, vhost), CONNECT_TIMEOUT)
        except BaseException as e:
            await client.close()
            if isinstance(e, TimeoutError):
                raise ClientError(f"{host}:{port} did not complete the AMQP handshake") from None
            raise
        return client

    async def _handshake(self, parts: Any, host: str, vhost: str | None) -> None:
        self._tasks.spawn(self._read(), "shovel connection reader")
        self._tasks.spawn(self._tick(), "shovel connection heartbeats")
        self.engine.start(sasl=True)
        self.flush()
        mechanisms = (await self.wait_for(lambda e: type(e) is ev.SaslMechanismsReceived)).mechanisms
        if parts.username:
            user, password = unquote(parts.username), unquote(parts.password or "")
            if "PLAIN" not in mechanisms:
                raise ClientError(f"the peer does not offer SASL PLAIN ({', '.join(mechanisms)})")
            self.engine.sasl_init("PLAIN", b"\0" + user.encode() + b"\0" + password.encode(), host)
        else:
            if "ANONYMOUS" not in mechanisms:
                raise ClientError(f"the peer does not offer SASL ANONYMOUS ({', '.join(mechanisms)}): give a user")
            self.engine.sasl_init("ANONYMOUS", b"warren-shovel", host)
        self.flush()
        outcome = await self.wait_for(lambda e: type(e) is ev.SaslOutcomeReceived)
        if outcome.code != d.SASL_OK:
            raise ClientError(f"login refused (SASL outcome {outcome.code})")
        # RabbitMQ (3.x's plugin and 4) and Warren read the vhost from an OPEN hostname "vhost:NAME"
        self.engine.open(hostname=f"vhost:{vhost}" if vhost else host)
        self.flush()
        await self.wait_for(lambda e: type(e) is ev.ConnectionOpened)
        self.session = self.engine.create_session()
        self.session.begin()
        self.flush()
        await self.wait_for(lambda e: type(e) is ev.SessionBegun)

    # ------------------------------------------------------------ links

    async def receiver(self, name: str, address: str, settled: bool) -> Any:
        link = self.session.create_link(name, d.RECEIVER)
        link.attach(source=d.Source(address=address), target=d.Target(),
                    snd_settle_mode=d.SND_SETTLED if settled else d.SND_UNSETTLED)  # fmt: skip
        return await self._attached(link, address, lambda a: a.source is not None)

    async def sender(self, name: str, address: str) -> Any:
        link = self.session.create_link(name, d.SENDER)
        link.attach(source=d.Source(), target=d.Target(address=address), snd_settle_mode=d.SND_MIXED)
        return await self._attached(link, address, lambda a: a.target is not None)

    async def _attached(self, link: Any, address: str, accepted: Callable[[Any], bool]) -> Any:
        # both expected before the ATTACH goes: a refusal's ATTACH and DETACH may come in one read
        detached = self.expect(lambda e: type(e) is ev.LinkDetached and e.link is link)
        attached = self.expect(lambda e: type(e) is ev.LinkAttached and e.link is link)
        self.flush()
        try:
            await asyncio.wait([detached, attached], return_when=asyncio.FIRST_COMPLETED)
            if detached.done() or not accepted(attached.result().attach):
                # a refused attach: the peer answers with a null terminus and then DETACH with the error
                error = (await detached).error
                raise ClientError(f"attach to '{address}' refused: {_error_text(error) or 'no reason given'}")
            return link
        finally:
            self._forget(detached)
            self._forget(attached)

    # ------------------------------------------------------------ I/O

    def flush(self) -> None:
        self._flush_pending = False
        data = self.engine.data_to_send()
        if data and not self._writer.is_closing():
            self._writer.write(data)

    def flush_soon(self) -> None:
        """Writes what the engine owes the peer at the end of this loop turn: what the other
        connection's one read makes this one send (a copy per message received, a settlement
        per confirm) leaves in one write, not one system call per message."""
        if not self._flush_pending:
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self._flush_if_pending)

    def _flush_if_pending(self) -> None:
        if self._flush_pending:
            self.flush()

    async def drained(self) -> None:
        """Waits until the written bytes are taken by the transport (backpressure)."""
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()

    def expect(self, predicate: Callable[[Any], bool]) -> asyncio.Future:
        """A future for the first event from now on that matches (an error once the connection ends)."""
        future = asyncio.get_running_loop().create_future()
        if self.closed is not None:
            future.set_exception(ClientError(self.closed))
        else:
            self._waiters.append((predicate, future))
        return future

    def _forget(self, future: asyncio.Future) -> None:
        self._waiters = [(p, f) for p, f in self._waiters if f is not future]
        if future.done() and not future.cancelled():
            future.exception()  # retrieved: no "never retrieved" warning
        future.cancel()

    async def wait_for(self, predicate: Callable[[Any], bool]) -> Any:
        future = self.expect(predicate)
        try:
            return await future
        finally:
            self._forget(future)

    async def _read(self) -> None:
        try:
            while True:
                data = await self._reader.read(65536)
                if not data:
                    self._end("the peer closed the connection")
                    return
                for event in self.engine.receive_data(data):
                    self._dispatch(event)
                self.flush()
        except (ConnectionError, OSError) as e:
            self._end(f"connection lost: {e}")

    def _dispatch(self, event: Any) -> None:
        for predicate, future in list(self._waiters):
            if not future.done() and predicate(event):
                future.set_result(event)
        if type(event) is ev.ConnectionClosed:
            self._end(f"connection closed by the peer: {_error_text(event.error) or 'no error'}")
            return
        try:
            self.on_event(event)
        except Exception as e:  # the owner's bug (or a message it cannot read) ends this connection, not the reader
            log.exception("shovel connection: handling %s failed", type(event).__name__)
            self._end(f"internal error: {type(e).__name__}: {e}")

    async def _tick(self) -> None:
        while self.closed is None:
            deadline = self.engine.tick()
            self.flush()
            if self.engine.closed:
                self._end("the peer went silent past the idle timeout")
                return
            await asyncio.sleep(1.0 if deadline is None else max(0.05, min(1.0, deadline - self.engine.clock())))

    def _end(self, why: str) -> None:
        if self.closed is not None:
            return
        self.closed = why
        for _, future in self._waiters:
            if not future.done():
                future.set_exception(ClientError(why))
        self.on_event(ev.ConnectionClosed(None, True))
        if not self._writer.is_closing():
            self._writer.close()

    async def close(self) -> None:
        """Closes politely when still open, then drops the socket."""
        if self.closed is None:
            with contextlib.suppress(Exception):
                self.engine.close()
                self.flush()
                await asyncio.wait_for(self._writer.drain(), 2.0)
        self.closed = self.closed or "closed by the shovel"
        self._tasks.cancel()
        for _, future in self._waiters:
            if not future.done():
                future.set_exception(ClientError(self.closed))
        if not self._writer.is_closing():
            self._writer.close()
