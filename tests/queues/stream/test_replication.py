"""Stream replication on one event loop, with real files: a leader
(StreamQueue + StreamLeader) and replicas (StreamReplica), the messages
between them passed through their wire encoding by a router that can cut
a replica off. Publishers are confirmed only once a majority has a chunk
on disk; replicas hold the leader's bytes exactly; a replica with a tail
the leader does not have cuts it."""

from __future__ import annotations

import asyncio
import os
import threading

from queues.base import Outcome, QueueMessage
from queues.stream import leader as leader_module
from queues.stream import replica as replica_module
from queues.stream import wire
from queues.stream.chunk import ChunkHeader
from queues.stream.config import StreamConfig
from queues.stream.leader import StreamLeader
from queues.stream.log import StreamLog
from queues.stream.queue import StreamQueue
from queues.stream.replica import StreamReplica
from queues.stream.spec import ReadSpec
from tests.queues.stream.test_stream_queue import Consumer, Host, body

NODES = ("a", "b", "c")


class Router:
    """Delivers each message on the next loop turn, through encode/decode; `cut` nodes drop theirs."""

    def __init__(self) -> None:
        self.leader: StreamQueue | None = None
        self.replicas: dict[str, StreamReplica] = {}
        self.cut: set[str] = set()
        self.sent: list[tuple[str, str, object]] = []

    def sender(self, me: str):
        def send(peer: str, message: object) -> None:
            if me in self.cut or peer in self.cut:
                return
            data = wire.encode(message)
            self.sent.append((me, peer, message))
            asyncio.get_running_loop().call_soon(self.deliver, me, peer, data)

        return send

    def deliver(self, sender: str, peer: str, data: bytes) -> None:
        if sender in self.cut or peer in self.cut:
            return
        msg = wire.decode(data)
        if isinstance(msg, wire.Fetch) and self.leader is not None:
            self.leader.role.on_fetch(sender, msg)
        elif isinstance(msg, wire.Chunks):
            self.replicas[peer].on_chunks(msg)
        elif isinstance(msg, wire.Committed):
            self.replicas[peer].on_committed(msg)
        elif isinstance(msg, wire.Truncate):
            self.replicas[peer].on_truncate(msg)


def make(tmp_path, router: Router, leader="a", epoch=1, replicas=NODES, notices=False) -> StreamQueue:
    loop = asyncio.get_running_loop()
    queue = StreamQueue("/", "s", {}, str(tmp_path / leader), Host(), loop)
    queue.role = StreamLeader(queue, leader, epoch, replicas, router.sender(leader), lambda: notices)
    queue.committed_end = queue.log.first_offset if len(replicas) > 1 else queue.log.next_offset
    router.leader = queue
    for node in replicas:
        if node != leader:
            rep = StreamReplica("/", "s", str(tmp_path / node), StreamConfig(), leader, epoch, router.sender(node),
                                loop)  # fmt: skip
            router.replicas[node] = rep
            rep.fetch()
    return queue


async def publish(queue: StreamQueue, n: int, start: int = 0) -> tuple[list[Outcome], asyncio.Event]:
    outcomes: list[Outcome] = []
    done = asyncio.Event()

    def confirm(outcome: Outcome) -> None:
        outcomes.append(outcome)
        if len(outcomes) == n:
            done.set()

    for i in range(start, start + n):
        queue.publish(QueueMessage(i, body(i), True, None, 0, False, "", ["s"]), confirm)
    return outcomes, done


async def until(predicate, what: str, timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


async def replicated(tmp_path, router: Router, n: int) -> StreamQueue:
    """A leader of epoch 1 whose `n` first messages every replica has."""
    queue = make(tmp_path, router)
    _, done = await publish(queue, n)
    await done.wait()
    await until(lambda: all(r.log.next_offset == n for r in router.replicas.values()), "replicated")
    return queue


def chunk_bytes(log) -> list[bytes]:
    out, offset = [], log.first_offset
    while (ref := log.chunk_for(offset)) is not None:
        out.append(log.chunk_bytes(ref))
        offset = ref.next_offset
    return out


def test_a_majority_confirms_and_replicas_hold_the_leaders_bytes(tmp_path):
    async def main():
        router = Router()
        router.cut.add("c")  # one replica of three away: a majority (a, b) remains
        queue = make(tmp_path, router)
        outcomes, done = await publish(queue, 500)
        await done.wait()
        assert set(outcomes) == {Outcome.ACCEPTED} and queue.committed_end == 500
        b = router.replicas["b"]
        await until(lambda: b.committed_end == 500, "b learns the committed end")
        assert chunk_bytes(b.log) == chunk_bytes(queue.log)
        # c comes back and catches up with many chunks, in bounded batches
        router.cut.clear()
        await until(lambda: router.replicas["c"].log.next_offset == 500, "c catches up")
        assert chunk_bytes(router.replicas["c"].log) == chunk_bytes(queue.log)
        assert router.replicas["c"].log_epoch == 1
        sizes = [sum(map(len, m.chunks)) for _, _, m in router.sent if isinstance(m, wire.Chunks)]
        assert max(sizes) <= wire.BATCH_BYTES + (1 << 20)

    asyncio.run(main())


def test_without_a_majority_nothing_is_confirmed_or_readable(tmp_path):
    async def main():
        router = Router()
        router.cut.update({"b", "c"})
        queue = make(tmp_path, router)
        consumer = Consumer()
        queue.attach_reader(consumer, ReadSpec("first"))
        queue.credit(consumer, 0, 100, False, False)
        outcomes, done = await publish(queue, 10)
        await until(lambda: queue.log.next_offset == 10, "the leader's own write")
        await asyncio.sleep(0.05)
        assert outcomes == [] and consumer.got == [] and queue.committed_end == 0
        router.cut.clear()
        for rep in router.replicas.values():
            rep.fetch()  # what the retry timer does
        await done.wait()
        assert set(outcomes) == {Outcome.ACCEPTED}
        await until(lambda: len(consumer.got) == 10, "the reader reads the committed messages")
        assert [m.seq for m in consumer.got] == list(range(10))

    asyncio.run(main())


def test_a_replica_truncates_a_tail_the_new_leader_does_not_have(tmp_path):
    async def main():
        router = Router()
        old = await replicated(tmp_path, router, 100)
        # the leader writes a tail only it has, then dies
        router.cut.update({"b", "c"})
        await publish(old, 50, 100)
        await until(lambda: old.log.next_offset == 150, "the old leader's unreplicated tail")
        old.close()
        for rep in router.replicas.values():
            rep.close()
        router.cut.clear()
        # b leads epoch 2 and takes new publishes; a (the old leader) follows it
        router.replicas = {}
        queue = StreamQueue("/", "s", {}, str(tmp_path / "b"), Host(), asyncio.get_running_loop())
        queue.role = StreamLeader(queue, "b", 2, NODES, router.sender("b"))
        queue.committed_end = 100
        router.leader = queue
        for node in ("a", "c"):
            rep = router.replicas[node] = StreamReplica("/", "s", str(tmp_path / node), StreamConfig(), "b", 2,
                                                        router.sender(node), asyncio.get_running_loop())  # fmt: skip
            rep.fetch()
        outcomes, done = await publish(queue, 30, 1000)
        await done.wait()
        assert set(outcomes) == {Outcome.ACCEPTED}
        await until(lambda: all(r.log.next_offset == 130 for r in router.replicas.values()), "every replica at 130")
        assert any(isinstance(m, wire.Truncate) and m.offset == 100 for _, _, m in router.sent)
        for rep in router.replicas.values():
            assert chunk_bytes(rep.log) == chunk_bytes(queue.log)
        assert sorted(os.listdir(tmp_path / "a")) == sorted(os.listdir(tmp_path / "b"))

    asyncio.run(main())


def test_a_stopped_replica_takes_nothing_more_of_its_epoch(tmp_path):
    async def main():
        router = Router()
        queue = make(tmp_path, router)
        _, done = await publish(queue, 20)
        await done.wait()
        b, c = router.replicas["b"], router.replicas["c"]
        await until(lambda: b.log.next_offset == 20 and c.log.next_offset == 20, "replicated")
        assert b.stop(1) == (1, 20) and c.stop(1) == (1, 20)
        outcomes, _ = await publish(queue, 5, 20)
        await until(lambda: queue.log.next_offset == 25, "the leader's own write")
        await asyncio.sleep(0.1)
        assert outcomes == [] and b.log.next_offset == 20 and queue.committed_end == 20

    asyncio.run(main())


def test_a_stop_holds_past_its_time_until_a_newer_epoch(tmp_path, monkeypatch):
    """The election a stop was for may be applied late: the replica takes nothing more of the
    epoch however long it waits (its node re-elects the leader once `fence_overdue`), nor
    after its node restarts, and follows the next epoch as soon as it comes."""
    monkeypatch.setattr(replica_module, "FENCE_S", 0.05)

    async def main():
        router = Router()
        queue = make(tmp_path, router)
        _, done = await publish(queue, 20)
        await done.wait()
        b = router.replicas["b"]
        await until(lambda: b.log.next_offset == 20, "replicated")
        assert b.stop(1) == (1, 20) and not b.fence_overdue()
        await asyncio.sleep(0.1)
        assert b.fence_overdue()
        b.fetch()  # its retry timer's, say: nothing goes
        outcomes, _ = await publish(queue, 5, 20)
        await until(lambda: router.replicas["c"].log.next_offset == 25, "c, not stopped, takes them")
        await asyncio.sleep(0.1)
        assert b.log.next_offset == 20 and b.fence_overdue()
        # b's node restarts: the copy opened again is still stopped for epoch 1
        b.close()
        b = router.replicas["b"] = StreamReplica("/", "s", str(tmp_path / "b"), StreamConfig(), "a", 1,
                                                 router.sender("b"), asyncio.get_running_loop())  # fmt: skip
        b.fetch()
        await asyncio.sleep(0.1)
        assert b.log.next_offset == 20 and b.fence_overdue()
        # the leader re-elected for epoch 2 (node/vhosts/stream_failover.py `_reelect`): b follows
        queue.role.epoch = 2
        queue.role.ends.clear()
        b.follow("a", 2)
        await until(lambda: b.log.next_offset == 25 and b.log_epoch == 2, "b in epoch 2")
        assert not b.fence_overdue()

    asyncio.run(main())


def test_replicas_apply_retention_as_the_leader_does(tmp_path):
    async def main():
        router = Router()
        loop = asyncio.get_running_loop()
        arguments = {"x-max-length-bytes": 20_000, "x-stream-max-segment-size-bytes": 4_000}
        queue = StreamQueue("/", "s", arguments, str(tmp_path / "a"), Host(), loop)
        queue.role = StreamLeader(queue, "a", 1, ("a", "b"), router.sender("a"))
        router.leader = queue
        b = router.replicas["b"] = StreamReplica("/", "s", str(tmp_path / "b"), StreamConfig.from_arguments(arguments),
                                                 "a", 1, router.sender("b"), loop)  # fmt: skip
        b.fetch()
        for start in range(0, 2000, 100):  # many small chunks, many segments
            _, done = await publish(queue, 100, start)
            await done.wait()
        await until(lambda: b.log.next_offset == 2000, "b has everything")
        assert queue.log.first_offset > 0 and b.log.first_offset > 0
        assert b.log.bytes <= 20_000 + 4_000 and len(b.log.segments) == len(queue.log.segments)

    asyncio.run(main())


def test_replicas_take_a_flush_while_the_leader_writes_it(tmp_path, monkeypatch):
    """The chunks of a flush go out when it is cut, not after the leader's fsync: some
    leave while the leader's log still ends before them. The leader's writes are held
    until chunks ahead of its log went out (at most 5 s each), so a busy machine
    finishing a write early cannot hide the order."""
    gate = threading.Event()
    write = StreamLog.write

    def held_write(*args: object) -> None:
        gate.wait(5)
        write(*args)

    monkeypatch.setattr(StreamLog, "write", staticmethod(held_write))

    async def main():
        router = Router()
        queue = make(tmp_path, router)
        ahead: list[bool] = []
        send = queue.role.send

        def recording(peer: str, message: object) -> None:
            if isinstance(message, wire.Chunks) and message.chunks:
                last = ChunkHeader.parse(message.chunks[-1])
                ahead.append(last.first_offset + last.count > queue.log.next_offset)
                if ahead[-1]:
                    gate.set()
            send(peer, message)

        queue.role.send = recording
        for start in range(0, 300, 100):
            outcomes, done = await publish(queue, 100, start)
            await done.wait()
            assert set(outcomes) == {Outcome.ACCEPTED}
        assert any(ahead)
        await until(lambda: all(r.log.next_offset == 300 for r in router.replicas.values()), "replicated")
        for rep in router.replicas.values():
            assert chunk_bytes(rep.log) == chunk_bytes(queue.log)

    asyncio.run(main())


def test_a_failed_leader_write_confirms_nothing_and_replicas_cut_its_chunks(tmp_path):
    """Replicas wrote a flush the leader failed to write: it is not confirmed (the leader's
    disk is one of the majority), and the replicas cut it before taking what follows."""

    async def main():
        router = Router()
        queue = make(tmp_path, router)
        _, done = await publish(queue, 10)
        await done.wait()
        await until(lambda: set(queue.role.parked) == {"b", "c"} and  # and know the committed end: they stay
                    all(f.committed == 10 for f in queue.role.parked.values()), "both replicas wait for more")  # fmt: skip
        segment = queue.log.segments[-1]
        writable, segment.fd = segment.fd, os.open(segment.path, os.O_RDONLY)  # the next write fails (EBADF)
        failed, done = await publish(queue, 10, 10)
        await done.wait()
        assert set(failed) == {Outcome.REJECTED} and queue.committed_end == 10 and queue.log.next_offset == 10
        sent_failed = [m for _, _, m in router.sent if isinstance(m, wire.Chunks) and m.chunks and
                       ChunkHeader.parse(m.chunks[0]).first_offset == 10]  # fmt: skip
        assert sent_failed, "the failed flush went to the replicas while the leader wrote it"
        await until(lambda: {p for _, p, m in router.sent if isinstance(m, wire.Truncate) and m.offset == 10} ==
                    {"b", "c"}, "both replicas are told to cut it")  # fmt: skip
        os.close(segment.fd)
        segment.fd = writable
        outcomes, done = await publish(queue, 10, 100)
        await done.wait()
        assert set(outcomes) == {Outcome.ACCEPTED} and queue.committed_end == 20
        await until(lambda: all(r.log.next_offset == 20 for r in router.replicas.values()), "replicated")
        for rep in router.replicas.values():
            assert chunk_bytes(rep.log) == chunk_bytes(queue.log)
        # the replicas hold the messages the leader wrote, not the ones it failed to write
        expected = [r.payload for r in queue.log.chunk_for(10).records(queue.log.chunk_for(10).header()[0])]
        for rep in router.replicas.values():
            ref = rep.log.chunk_for(10)
            assert [r.payload for r in ref.records(ref.header()[0])] == expected

    asyncio.run(main())


def test_a_replica_that_fetched_before_the_leader_led_is_told_to_fetch_again(tmp_path):
    """A replica's first fetch reached the leader's node before its stream started there
    (dropped): the new leader's announcement makes it fetch, without its retry timer."""

    async def main():
        router = Router()
        loop = asyncio.get_running_loop()
        b = router.replicas["b"] = StreamReplica("/", "s", str(tmp_path / "b"), StreamConfig(), "a", 1,
                                                 router.sender("b"), loop)  # fmt: skip
        b._timer.cancel()  # only the announcement may make it fetch again
        b.fetch()  # router.leader is None: dropped
        await asyncio.sleep(0.05)
        queue = StreamQueue("/", "s", {}, str(tmp_path / "a"), Host(), loop)
        queue.role = StreamLeader(queue, "a", 1, ("a", "b"), router.sender("a"))
        router.leader = queue
        queue.role.announce()
        outcomes, done = await publish(queue, 50)
        await done.wait()
        assert set(outcomes) == {Outcome.ACCEPTED}
        await until(lambda: b.log.next_offset == 50, "b has everything")
        assert chunk_bytes(b.log) == chunk_bytes(queue.log)

    asyncio.run(main())


def test_a_committed_notice_moves_a_waiting_replicas_end_and_keeps_its_fetch(tmp_path, monkeypatch):
    """With stream_commit_notices the leader tells a parked replica its new committed end in a
    `committed` notice and keeps the fetch: the replica sends no new fetch for it, its readers
    learn the end, and the kept fetch takes the next flush. Without the flag the same news is
    an answer without chunks, and each costs the replica another fetch."""

    monkeypatch.setattr(leader_module, "NOTICE_DELAY_S", 0.0)

    async def main():
        for notices in (False, True):
            router = Router()
            queue = make(tmp_path / str(notices), router, notices=notices)
            b = router.replicas["b"]
            commits: list[int] = []
            b.on_commit = lambda b=b, commits=commits: commits.append(b.committed_end)
            for start in range(0, 300, 100):  # a flush at a time, each committed before the next
                outcomes, done = await publish(queue, 100, start)
                await done.wait()
                assert set(outcomes) == {Outcome.ACCEPTED}
                await until(lambda b=b, start=start: b.committed_end == start + 100, "b learns the committed end")
            await until(lambda queue=queue: set(queue.role.parked) == {"b", "c"} and
                        all(f.committed == 300 for f in queue.role.parked.values()), "both wait, knowing 300")  # fmt: skip
            assert commits[-1] == 300
            to_b = [m for _, p, m in router.sent if p == "b"]
            fetches = [m for s, _, m in router.sent if s == "b" and isinstance(m, wire.Fetch)]
            empty = [m for m in to_b if isinstance(m, wire.Chunks) and not m.chunks]
            notes = [m for m in to_b if isinstance(m, wire.Committed)]
            with_chunks = [m for m in to_b if isinstance(m, wire.Chunks) and m.chunks]
            # the first answer, without chunks, gives the empty replica the epoch; 300, with no
            # flush after it, reaches b only as news (the others may ride on a flush's chunks)
            if notices:
                assert [m.committed for m in empty] == [0] and notes[-1].committed == 300
                assert {m.committed for m in notes} <= {100, 200, 300}
            else:
                assert not notes and empty[0].committed == 0 and empty[-1].committed == 300
            # a fetch to start, then one per answer that ended a fetch: none after a notice
            assert len(fetches) == 1 + len(with_chunks) + len(empty)
            assert chunk_bytes(b.log) == chunk_bytes(queue.log)

    asyncio.run(main())


def test_a_notice_of_another_epoch_or_past_the_log_moves_nothing(tmp_path):
    async def main():
        router = Router()
        queue = make(tmp_path, router, notices=True)
        _, done = await publish(queue, 50)
        await done.wait()
        b = router.replicas["b"]
        await until(lambda: b.committed_end == 50, "b learns the committed end")
        b.on_committed(wire.Committed("/", "s", 2, 60))  # another epoch
        b.on_committed(wire.Committed("/", "s", 1, 80))  # past its log: only as far as it has
        assert b.committed_end == 50

    asyncio.run(main())


def test_a_flush_cut_before_a_notice_is_due_carries_the_committed_end_instead(tmp_path, monkeypatch):
    """A busy stream sends no notices: its next flush, cut before NOTICE_DELAY_S, tells the
    replicas the committed end with its chunks."""
    monkeypatch.setattr(leader_module, "NOTICE_DELAY_S", 30.0)

    async def main():
        router = Router()
        queue = make(tmp_path, router, notices=True)
        b = router.replicas["b"]
        for start in range(0, 300, 100):
            _, done = await publish(queue, 100, start)
            await done.wait()
        # from the third flush's chunks: 200, or 300 if its answer left once that was committed
        await until(lambda: b.committed_end >= 200, "b learns the committed end from the third flush's chunks")
        assert not [m for _, _, m in router.sent if isinstance(m, wire.Committed)]
        assert queue.committed_end == 300 and b.log.next_offset == 300

    asyncio.run(main())


def test_a_leader_closing_with_a_write_in_flight_cuts_no_replica_and_confirms_nothing_it_cannot_know(tmp_path):
    # Found by a five-node chaos run (seed 28, forget-rejoin): the leader's node stopped while a
    # chunk was being written; its publishers were told accepted on its own disk alone, its log
    # never counted the chunk, and the closed leader went on answering fetches, telling the
    # replicas that had the chunk to cut it: a confirmed message lost.
    async def main():
        router = Router()
        queue = make(tmp_path, router)
        await until(lambda: len(queue.role.parked) == 2, "the replicas' fetches wait at the leader")
        outcomes, done = await publish(queue, 10)
        await asyncio.sleep(0)  # the flush: the chunk goes to the disk and to the waiting replicas
        assert queue.writing
        queue.close()
        await done.wait()
        assert outcomes == [Outcome.UNKNOWN] * 10  # on one disk: committed only once a majority has it
        after, _ = await publish(queue, 5, start=10)
        assert after == [Outcome.RELEASED] * 5  # never written: sent again elsewhere
        b, c = router.replicas["b"], router.replicas["c"]
        await until(lambda: b.log.next_offset == c.log.next_offset == 10, "the replicas wrote the chunk")
        for _ in range(3):  # fetches the closed leader answers with nothing, and no cut
            b.fetch()
            c.fetch()
            await asyncio.sleep(0.05)
        assert b.log.next_offset == c.log.next_offset == 10
        assert not any(isinstance(m, wire.Truncate) for _, _, m in router.sent)

    asyncio.run(main())


def test_a_new_leaders_announcement_does_not_make_an_unchecked_tail_look_like_its_epoch(tmp_path):
    """c holds a tail of epoch 1 that b, leading epoch 2, never had; b's announcement reaches
    c, c's fetches do not reach b. Had c recorded epoch 2 on the announcement, the next
    failover, preferring the newest log epoch and then the longest log, would choose c's
    log over a's (epoch 2, shorter, with chunks b committed with a) and cut those from a:
    the five confirmed stream messages seed 24 lost on five nodes (docs/chaos.md).
    c claims epoch 2 only once b has checked its tail, and then has b's log."""

    async def main():
        router = Router()
        old = await replicated(tmp_path, router, 100)
        router.cut.add("b")  # c takes a tail b does not have
        await publish(old, 50, 100)
        await until(lambda: router.replicas["c"].log.next_offset == 150, "c's tail")
        old.close()
        for rep in router.replicas.values():
            rep.close()
        router.cut.clear()
        loop = asyncio.get_running_loop()
        queue = StreamQueue("/", "s", {}, str(tmp_path / "b"), Host(), loop)
        queue.role = StreamLeader(queue, "b", 2, ("b", "c"), router.sender("b"))  # a away
        queue.committed_end = 100
        c = router.replicas["c"] = StreamReplica("/", "s", str(tmp_path / "c"), StreamConfig(), "b", 2,
                                                 router.sender("c"), loop)  # fmt: skip
        c._timer.cancel()
        router.replicas.pop("b")
        mark = len(router.sent)
        queue.role.announce()  # router.leader is None: c's fetches are lost, b's messages arrive
        await until(lambda: any(isinstance(m, wire.Fetch) and s == "c" for s, _, m in router.sent[mark:]), "c fetches")
        # what it would answer a failover's stop (the log epoch and end of its log)
        assert (c.log_epoch, c.log.next_offset, c.committed_end) == (1, 150, 0)
        router.leader = queue  # c's fetches reach b now
        queue.role.announce()
        await until(lambda: c.log.next_offset == 100 and c.log_epoch == 2, "c cut to b's log, in epoch 2")
        assert chunk_bytes(c.log) == chunk_bytes(queue.log)

    asyncio.run(main())
