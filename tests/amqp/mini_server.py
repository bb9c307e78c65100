"""A tiny broker on the AMQP engine, for end-to-end and fuzz tests.

`BrokerHandler` is sans-I/O: it reacts to one engine Connection's events the
way a broker would (SASL ANONYMOUS and PLAIN, OPEN, BEGIN, ATTACH replies,
credit, storing messages per address and delivering them to receivers as
credit allows, accepting every delivery). `MiniServer` runs it over asyncio
sockets on a background thread for real clients such as python-qpid-proton.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict, deque
from typing import Any

from amqp import definitions as d
from amqp import events as ev
from amqp.connection import SERVER, Connection
from amqp.errors import Condition

CREDIT = 100


class Store:
    """Messages by address, and the sending links attached to each address."""

    def __init__(self) -> None:
        self.queues: dict[str, deque[tuple[bytes, int]]] = defaultdict(deque)
        self.consumers: dict[str, list[Any]] = defaultdict(list)  # address -> sending links
        self.received: list[tuple[str, bytes]] = []  # every message accepted, in order

    def deliver(self, address: str) -> None:
        """Sends what the address holds to its consumers, as credit allows."""
        queue = self.queues[address]
        for link in list(self.consumers[address]):
            handler = link.context
            while queue and link.active and link.link_credit > 0 and not handler.conn.closed:
                payload, fmt = queue.popleft()
                handler.send(link, payload, fmt)
            if link.drain and link.link_credit > 0 and link.active and not handler.conn.closed:
                link.drained()


class BrokerHandler:
    """Answers one connection's events like a small broker."""

    def __init__(self, conn: Connection, store: Store, credit: int = CREDIT,
                 users: dict[str, str] | None = None, window: int | None = None):  # fmt: skip
        self.conn = conn
        self.store = store
        self.credit = credit
        self.window = window  # the incoming-window of the sessions we answer
        self.users = users if users is not None else {"guest": "guest"}
        self.outstanding: dict[Any, tuple[bytes, int]] = {}  # our unsettled deliveries -> message
        self._tag = 0
        self.sasl_mechanism: str | None = None
        self.user: str | None = None
        self.log: list[str] = []  # names of the events seen, for tests

    def handle(self, events: list) -> None:
        for e in events:
            self.log.append(type(e).__name__)
            getattr(self, "on_" + type(e).__name__, _ignore)(e)
        if self.conn.closed:
            self._requeue_all()

    # ---------------------------------------------------------------- events

    def on_SaslInitReceived(self, e: ev.SaslInitReceived) -> None:
        ok = False
        if e.mechanism == "ANONYMOUS":
            ok = True
        elif e.mechanism == "PLAIN" and e.initial_response:
            parts = e.initial_response.split(b"\x00")
            if len(parts) == 3:
                user, password = parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
                ok = self.users.get(user) == password
                self.user = user if ok else None
        self.sasl_mechanism = e.mechanism
        self.conn.sasl_outcome(ok)

    def on_ConnectionOpened(self, e: ev.ConnectionOpened) -> None:
        if not self.conn.open_sent:
            self.conn.open()

    def on_SessionBegun(self, e: ev.SessionBegun) -> None:
        if not e.session.begin_sent:
            e.session.begin(incoming_window=self.window)

    def on_LinkAttached(self, e: ev.LinkAttached) -> None:
        link = e.link
        if link.attach_sent:
            return
        a = e.attach
        terminus = a.source if link.is_sender else a.target
        address = getattr(terminus, "address", None)
        if type(address) is not str:
            link.refuse(Condition.NOT_FOUND, "an address is required")
            return
        link.context = self
        link.address = address  # type: ignore[attr-defined]
        link.attach(source=a.source, target=a.target)
        if link.is_sender:
            self.store.consumers[address].append(link)
            self.store.deliver(address)
        else:
            link.flow(link_credit=self.credit)

    def on_LinkFlow(self, e: ev.LinkFlow) -> None:
        link = e.link
        if not link.is_sender:
            return
        address = getattr(link, "address", None)
        if address is not None:
            self.store.deliver(address)
        if e.echo and link.active:
            link.flow()

    def on_MessageReceived(self, e: ev.MessageReceived) -> None:
        link, delivery = e.link, e.delivery
        address = getattr(link, "address", None)
        if address is None:
            return
        self.store.queues[address].append((delivery.payload, delivery.message_format))
        self.store.received.append((address, delivery.payload))
        if not delivery.settled:
            link.session.settle(delivery, d.Accepted())
        if link.active and link.link_credit < self.credit // 2:
            link.flow(link_credit=self.credit)
        self.store.deliver(address)

    def on_DeliveriesUpdated(self, e: ev.DeliveriesUpdated) -> None:
        requeued = set()
        for delivery in e.deliveries:
            message = self.outstanding.get(delivery)
            if message is None:
                continue
            if isinstance(delivery.state, (d.Released, d.Modified)):
                del self.outstanding[delivery]
                self.store.queues[delivery.link.address].appendleft(message)
                requeued.add(delivery.link.address)
            elif delivery.remote_settled or delivery.state is not None:
                del self.outstanding[delivery]
                if not delivery.settled and delivery.link.session.connection is self.conn:
                    delivery.link.session.settle(delivery, delivery.state)
        for address in requeued:
            self.store.deliver(address)

    def on_LinkDetached(self, e: ev.LinkDetached) -> None:
        link = e.link
        address = getattr(link, "address", None)
        if address is not None and link in self.store.consumers[address]:
            self.store.consumers[address].remove(link)
        for delivery in e.unsettled:
            message = self.outstanding.pop(delivery, None)
            if message is not None:
                self.store.queues[address].appendleft(message)
        if address is not None:
            self.store.deliver(address)

    def on_SessionEnded(self, e: ev.SessionEnded) -> None:
        self._requeue_session(e.session)

    # ---------------------------------------------------------------- helpers

    def send(self, link: Any, payload: bytes, message_format: int) -> None:
        self._tag += 1
        settled = link.snd_settle_mode == d.SND_SETTLED
        delivery = link.send(self._tag.to_bytes(4, "big"), payload, settled=settled, message_format=message_format)
        if not settled:
            self.outstanding[delivery] = (payload, message_format)

    def _requeue_session(self, session: Any) -> None:
        for link in list(session.links.values()) + list(session.remote_links.values()):
            address = getattr(link, "address", None)
            if address is not None and link in self.store.consumers[address]:
                self.store.consumers[address].remove(link)
        for delivery, message in list(self.outstanding.items()):
            if delivery.link.session is session:
                del self.outstanding[delivery]
                self.store.queues[delivery.link.address].appendleft(message)

    def _requeue_all(self) -> None:
        for session in list(self.conn.sessions.values()):
            self._requeue_session(session)
        for delivery, message in list(self.outstanding.items()):
            del self.outstanding[delivery]
            self.store.queues[delivery.link.address].appendleft(message)
        for links in self.store.consumers.values():
            links[:] = [link for link in links if link.context is not self]


def _ignore(e: Any) -> None:
    pass


class MiniServer:
    """BrokerHandler over asyncio sockets, on a thread of its own.

    All connections share one event loop, so a message stored by one
    connection can be delivered on another in the same step; after every
    read each connection's output is flushed.
    """

    def __init__(self, host: str = "127.0.0.1", **conn_kw: Any):
        self.host = host
        self.port = 0
        self.conn_kw = conn_kw
        self.store = Store()
        self.handlers: list[BrokerHandler] = []
        self.errors: list[BaseException] = []  # anything but a clean run, for the test to assert on
        self._writers: dict[BrokerHandler, asyncio.StreamWriter] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="mini-amqp-server", daemon=True)
        self._ready = threading.Event()
        self._stopping: asyncio.Event | None = None

    def __enter__(self) -> MiniServer:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("mini server did not start")

    def stop(self) -> None:
        if self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"amqp://{self.host}:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())
        self._loop.close()

    async def _main(self) -> None:
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._client, self.host, 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        ticker = asyncio.create_task(self._ticker())
        async with server:
            await self._stopping.wait()
        ticker.cancel()
        for writer in list(self._writers.values()):
            writer.close()

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(0.2)
            for handler in list(self._writers):
                handler.conn.tick()
            self._flush_all()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(SERVER, **self.conn_kw)
        handler = BrokerHandler(conn, self.store)
        self.handlers.append(handler)
        self._writers[handler] = writer
        try:
            while not conn.closed:
                data = await reader.read(65536)
                if not data:
                    break
                handler.handle(conn.receive_data(data))
                # bytes pipelined behind a SASL init wait for the outcome
                handler.handle(conn.receive_data(b""))
                self._flush_all()
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception as e:  # an engine bug: make the test fail
            self.errors.append(e)
            raise
        finally:
            self._flush_all()
            handler.handle([])
            self._writers.pop(handler, None)
            writer.close()

    def _flush_all(self) -> None:
        for handler, writer in list(self._writers.items()):
            data = handler.conn.data_to_send()
            if data and not writer.is_closing():
                writer.write(data)
            if handler.conn.closed and not writer.is_closing():
                writer.close()
