"""Stream consumers across a change of their node's role, on one event loop
with real files (the Router of tests/queues/stream/test_replication.py): a
reader of the leader's copy goes on reading the same files as a replica's, a
reader in the middle of a chunk goes on from its next offset, and a reader
of a copy the node no longer has goes on at the leader through the proxy
with its filters; each offset once, the credit and delivery-count kept."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from amqp.types import Described, Symbol
from node.vhosts.stream_follower import StreamFollower
from node.vhosts.stream_moves import MovingReaders
from node.vhosts.stream_proxy import StreamProxy
from queues.stream.config import StreamConfig
from queues.stream.leader import StreamLeader
from queues.stream.queue import StreamQueue
from queues.stream.replica import StreamReplica
from queues.stream.spec import OFFSET_SPEC, ReadSpec
from tests.queues.stream.stream_fakes import Consumer, Host
from tests.queues.stream.stream_fakes import until as until_got
from tests.queues.stream.test_replication import NODES, Router, make, publish, until

KEY = ("/", "s")
RECORD = SimpleNamespace(name="s", durable=True, exclusive_owner=None, auto_delete=False, type="stream", leader="b",
                         replicas=())  # fmt: skip


async def closed(copy) -> None:
    done = asyncio.Event()
    copy.close(done.set)
    await done.wait()


def offsets(consumer: Consumer) -> list[int]:
    return [m.seq for m in consumer.got]


def test_a_reader_of_the_leader_goes_on_reading_the_same_files_as_a_replica(tmp_path):
    async def main():
        loop = asyncio.get_running_loop()
        router = Router()
        a = make(tmp_path, router)  # a leads epoch 1, b and c replicate
        _, done = await publish(a, 100)
        await done.wait()
        consumer = Consumer()
        a.attach_reader(consumer, ReadSpec("first"))
        a.credit(consumer, 0, 30, False, False)
        await until_got(consumer, lambda: len(consumer.got) == 30)
        await until(lambda: all(r.log.next_offset == 100 for r in router.replicas.values()), "replicated")
        moving = MovingReaders()
        moving.park(KEY, a)  # a is demoted: its files close, its readers wait
        a.credit(consumer, 30, 50, False, False)  # the link grants more meanwhile: kept, nothing read
        await closed(router.replicas.pop("b"))
        b = StreamQueue("/", "s", {}, str(tmp_path / "b"), Host(), loop)
        b.role = StreamLeader(b, "b", 2, NODES, router.sender("b"))
        b.committed_end = 100
        router.leader = b
        await closed(a)
        assert len(consumer.got) == 30 and not consumer.deleted
        replica = router.replicas["a"] = StreamReplica("/", "s", str(tmp_path / "a"), StreamConfig(), "b", 2,
                                                       router.sender("a"), loop)  # fmt: skip
        router.replicas["c"].follow("b", 2)
        follower = StreamFollower(SimpleNamespace(loop=loop), "/", RECORD, {}, replica)
        moving.settle(KEY, follower)
        replica.fetch()
        _, done = await publish(b, 20, 100)
        await done.wait()
        await until_got(consumer, lambda: len(consumer.got) == 80)
        follower.credit(consumer, 80, 100, False, False)
        await until_got(consumer, lambda: len(consumer.got) == 120)
        assert offsets(consumer) == list(range(120)) and not consumer.deleted
        assert follower.stats.delivered == 90  # read from a's files as a replica
        await closed(replica)
        await closed(b)

    asyncio.run(main())


def test_a_reader_in_the_middle_of_a_chunk_goes_on_from_its_next_offset(tmp_path):
    async def main():
        loop = asyncio.get_running_loop()
        old = StreamQueue("/", "s", {}, str(tmp_path), Host(), loop)
        _, done = await publish(old, 100)  # one chunk
        await done.wait()
        assert len(old.log.segments) == 1
        consumer = Consumer()
        old.attach_reader(consumer, ReadSpec("first"))
        old.credit(consumer, 0, 10, False, False)
        await until_got(consumer, lambda: len(consumer.got) == 10)
        moving = MovingReaders()
        moving.park(KEY, old)
        await closed(old)
        new = StreamQueue("/", "s", {}, str(tmp_path), Host(), loop)  # the same files in another role
        moving.settle(KEY, new)
        new.credit(consumer, 10, 200, True, False)  # drain: all there is, then the credit is used up
        await until_got(consumer, lambda: consumer.replies and consumer.replies[-1][3])
        assert offsets(consumer) == list(range(100))
        assert consumer.replies[-1][:2] == (210, 0)  # the delivery-count went on from the old copy's
        moving.drop(KEY)
        assert not consumer.deleted  # nothing was left parked
        await closed(new)

    asyncio.run(main())


class _Service:
    """The proxy's side of node/vhosts/remote_queue.py QueueService, recorded."""

    def __init__(self) -> None:
        self.attached: list[tuple] = []
        self.sent: list[list] = []

    def attach(self, queue, consumer, priority, filters=None) -> int:
        self.attached.append((consumer, filters))
        return 7

    def send_for(self, cid, message) -> None:
        self.sent.append(message)

    def credit(self, cid, delivery_count, link_credit, drain, echo) -> None:  # no lease for a stream's reader
        self.send_for(cid, ["credit", cid, delivery_count, link_credit, drain, echo])

    def detach(self, cid) -> None:
        self.sent.append(["detach", cid])


def test_a_reader_of_a_copy_the_node_no_longer_has_goes_on_at_the_leader_with_its_filters(tmp_path):
    async def main():
        loop = asyncio.get_running_loop()
        old = StreamQueue("/", "s", {}, str(tmp_path), Host(), loop)
        _, done = await publish(old, 40)
        await done.wait()
        sql = Described(Symbol("amqp:sql-filter"), "properties.subject IS NULL")
        filters = {Symbol(OFFSET_SPEC): Described(Symbol(OFFSET_SPEC), "first"), Symbol("mine"): sql}
        consumer = Consumer()
        old.attach_reader(consumer, ReadSpec.from_filter_set(filters))
        old.credit(consumer, 0, 25, False, False)
        await until_got(consumer, lambda: len(consumer.got) == 25)
        moving = MovingReaders()
        moving.park(KEY, old)
        await closed(old)
        service = _Service()
        proxy = StreamProxy(SimpleNamespace(loop=loop, queue_service=service), "/", RECORD, {})
        moving.settle(KEY, proxy)
        (served, sent_filters), = service.attached
        assert sent_filters == {"mine": sql, OFFSET_SPEC: 25}  # from its next offset, its own filter kept
        assert ReadSpec.from_filter_set(sent_filters).sql is not None
        assert service.sent == [["credit", 7, 0, 0, False, True]]  # no credit left: the leader's reader counts from 0
        served.credit_reply(0, 0, 15, False)  # the leader's answer, shifted to the link's delivery-count
        assert consumer.replies[-1] == (25, 0, 15, False)
        proxy.credit(consumer, 25, 10, False, False)  # the link's next FLOW, shifted back
        assert service.sent[-1] == ["credit", 7, 0, 10, False, False]
        proxy.detach_consumer(consumer)
        assert service.sent[-1] == ["detach", 7] and not proxy.served

    asyncio.run(main())


def segment_files(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.suffix == ".segment")


def test_a_policy_reaches_the_replicas_copies_which_cut_and_retain_segments_as_the_leader(tmp_path):
    async def main():
        loop = asyncio.get_running_loop()
        router = Router()
        leader = make(tmp_path, router)
        followers = [StreamFollower(SimpleNamespace(loop=loop), "/", RECORD, {}, router.replicas[n]) for n in "bc"]
        small = {"x-stream-max-segment-size-bytes": 1000}
        for copy in (leader, *followers):  # what node/vhosts/policies.py does on each node
            copy.apply_policy(small)
        assert [f.replica.log.config.segment_bytes for f in followers] == [1000, 1000]
        for batch in range(10):
            _, done = await publish(leader, 20, batch * 20)
            await done.wait()
        await until(lambda: all(r.log.next_offset == 200 for r in router.replicas.values()), "replicated")
        before = segment_files(tmp_path / "a")
        assert len(before) > 3
        assert segment_files(tmp_path / "b") == segment_files(tmp_path / "c") == before
        retained = {**small, "x-max-length-bytes": 2000}
        for copy in (leader, *followers):
            copy.apply_policy(retained)
        assert [f.effective_arguments for f in followers] == [retained, retained]
        _, done = await publish(leader, 20, 200)  # the leader applies retention after a write
        await done.wait()
        await until(lambda: all(r.log.next_offset == 220 for r in router.replicas.values()), "replicated")
        after = segment_files(tmp_path / "a")
        assert len(after) < len(before)
        assert segment_files(tmp_path / "b") == segment_files(tmp_path / "c") == after
        assert {r.log.first_offset for r in router.replicas.values()} == {leader.log.first_offset} != {0}

    asyncio.run(main())
