"""A stream consumer read through a node without a copy (node/vhosts/stream_proxy.py)
when the node serving it goes away: it is not detached but attached again, from
the offset after the last message it got, with the link's delivery-count and
credit, once the stream is served again; only a deleted stream or a wait longer
than WAIT_S ends it. The queue service (node/vhosts/remote_queue.py) is
recorded; the 4-node kill -9 test in test_stream_replication.py runs it for real."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from amqp.errors import Condition
from amqp.types import Described, Symbol
from node.vhosts import stream_proxy
from node.vhosts.stream_proxy import StreamProxy
from queues.base import QueueMessage
from queues.stream.spec import OFFSET_SPEC
from tests.queues.stream.stream_fakes import Consumer

RECORD = SimpleNamespace(name="s", durable=True, exclusive_owner=None, auto_delete=False, type="stream", leader="a",
                         replicas=())  # fmt: skip
SQL = Described(Symbol("amqp:sql-filter"), "properties.subject IS NULL")
FILTERS = {Symbol(OFFSET_SPEC): Described(Symbol(OFFSET_SPEC), "first"), Symbol("mine"): SQL}


class Service:
    """The proxy's side of QueueService: attaches numbered from 1, messages recorded."""

    def __init__(self) -> None:
        self.attached: list[tuple] = []  # (cid, the served consumer, its filter set)
        self.sent: list[list] = []

    def attach(self, queue, consumer, priority, filters=None) -> int:
        self.attached.append((len(self.attached) + 1, consumer, filters))
        return len(self.attached)

    def send_for(self, cid, message) -> None:
        self.sent.append(message)

    def credit(self, cid, delivery_count, link_credit, drain, echo) -> None:  # no lease for a stream's reader
        self.send_for(cid, ["credit", cid, delivery_count, link_credit, drain, echo])

    def detach(self, cid) -> None:
        self.sent.append(["detach", cid])


async def timers() -> None:
    """Lets the proxy's retry timers (RETRY_S set to 0) run: a few turns of the loop."""
    for _ in range(3):
        await asyncio.sleep(0)


def reading(loop) -> tuple[StreamProxy, Service, Consumer]:
    """A proxy with one reader from `first`, 10 credit granted and offsets 0-3 delivered."""
    service = Service()
    proxy = StreamProxy(SimpleNamespace(loop=loop, queue_service=service), "/", RECORD, {})
    consumer = Consumer()
    proxy.attach_reader(consumer, proxy.read_spec(FILTERS, 4096))
    proxy.credit(consumer, 0, 10, False, False)
    (_, served, filters), = service.attached
    assert filters == {str(k): v for k, v in FILTERS.items()} and service.sent == [["credit", 1, 0, 10, False, False]]
    for offset in range(4):
        served.deliver(proxy, QueueMessage(offset, b"m", True))
    return proxy, service, consumer


def test_a_reader_whose_node_is_lost_is_attached_again_from_its_next_offset(monkeypatch):
    monkeypatch.setattr(stream_proxy, "RETRY_S", 0.0)
    async def main():
        loop = asyncio.get_running_loop()
        proxy, service, consumer = reading(loop)
        served = service.attached[0][1]
        proxy.consumer_lost(served, Condition.DETACH_FORCED, "node a unreachable")
        assert not consumer.deleted and consumer not in proxy.consumers  # waits, its link kept
        proxy.credit(consumer, 4, 8, False, False)  # a FLOW meanwhile: kept for the next attach
        await timers()
        (cid, again, filters) = service.attached[1]
        assert again is served and filters == {"mine": SQL, OFFSET_SPEC: 4}  # the next offset, its filter kept
        assert service.sent[-1] == ["credit", 2, 0, 8, False, True]  # the new reader counts from 0
        served.credit_reply(0, 8, 100, False)
        assert consumer.replies[-1] == (4, 8, 100, False)  # shifted back to the link's delivery-count
        served.deliver(proxy, QueueMessage(4, b"m", True))
        assert [m.seq for m in consumer.got] == [0, 1, 2, 3, 4] and served.lost_at is None
        proxy.credit(consumer, 5, 7, False, False)
        assert service.sent[-1] == ["credit", 2, 1, 7, False, False]

    asyncio.run(main())


def test_a_new_leader_takes_the_waiting_readers_at_once(monkeypatch):
    monkeypatch.setattr(stream_proxy, "RETRY_S", 0.0)
    async def main():
        loop = asyncio.get_running_loop()
        proxy, service, consumer = reading(loop)
        proxy.consumer_lost(service.attached[0][1], Condition.NOT_FOUND, "the copy is not open there yet")
        proxy.leader_moved("b")
        assert proxy.leader == "b" and len(service.attached) == 2 and service.attached[1][2][OFFSET_SPEC] == 4
        assert proxy.consumers[consumer] == 2
        await timers()
        assert len(service.attached) == 2  # the timer's retry found it served
        proxy.leader_moved("c")  # not heard from since its attach at b: attached at c too
        assert len(service.attached) == 3 and service.sent[-2] == ["detach", 2]
        service.attached[2][1].credit_reply(0, 10, 0, False)  # c serves it
        proxy.leader_moved("d")  # a reader being served stays where it is (the node goes on serving it)
        assert len(service.attached) == 3

    asyncio.run(main())


def test_a_deleted_stream_or_a_long_wait_ends_the_reader(monkeypatch):
    async def main():
        loop = asyncio.get_running_loop()
        proxy, service, consumer = reading(loop)
        proxy.consumer_lost(service.attached[0][1], Condition.RESOURCE_DELETED, "deleted")
        assert consumer.deleted and not proxy.served

        proxy, service, consumer = reading(loop)
        proxy.consumer_lost(service.attached[0][1], Condition.DETACH_FORCED, "unreachable")
        proxy.delete()  # while it waits
        assert consumer.deleted and not proxy.served

        monkeypatch.setattr(stream_proxy, "WAIT_S", 0.0)
        monkeypatch.setattr(stream_proxy, "RETRY_S", 0.0)
        proxy, service, consumer = reading(loop)
        served = service.attached[0][1]
        proxy.consumer_lost(served, Condition.DETACH_FORCED, "unreachable")
        await timers()
        proxy.consumer_lost(served, Condition.DETACH_FORCED, "unreachable")  # the second attach failed too
        assert consumer.deleted and not proxy.served

    asyncio.run(main())
