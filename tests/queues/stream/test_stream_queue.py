"""StreamQueue on a real event loop and real files: confirms after the
fsync, credit and drain as credit API v2 says, settlement that changes
nothing, and reading a long log in bounded turns."""

from __future__ import annotations

import asyncio

import pytest

from amqp.message import Message
from queues.base import ACCEPT, Outcome, QueueMessage
from queues.stream import readers
from queues.stream.queue import StreamQueue
from queues.stream.spec import ReadSpec

from .stream_fakes import Consumer, Host, publish_payloads, until


def body(i: int) -> bytes:
    return Message.build(f"m{i}").payload


async def publish(stream: StreamQueue, n: int, start: int = 0) -> list[Outcome]:
    return await publish_payloads(stream, (body(i) for i in range(start, start + n)))


def run(coro):
    return asyncio.run(coro)


def test_confirms_come_after_the_chunk_is_on_disk(tmp_path):
    async def main():
        stream = StreamQueue("/", "s", {}, str(tmp_path / "s"), Host(), asyncio.get_running_loop())
        outcomes = await publish(stream, 100)
        assert outcomes == [Outcome.ACCEPTED] * 100 and stream.message_count == 100
        assert len(stream.log.segments[0].offsets) < 100  # one flush per loop turn: messages share chunks
        stream.close()

    run(main())


def test_credit_drain_and_settlement(tmp_path):
    async def main():
        stream = StreamQueue("/", "s", {}, str(tmp_path / "s"), Host(), asyncio.get_running_loop())
        await publish(stream, 5)
        c = Consumer()
        stream.attach_reader(c, ReadSpec.from_filter_set({"rabbitmq:stream-offset-spec": "first"}))
        stream.credit(c, 0, 3, False, False)
        assert [m.seq for m in c.got] == [0, 1, 2] and c.replies == []
        stream.settle(c, [0, 1, 2], ACCEPT)  # nothing happens: the messages stay
        assert stream.message_count == 5
        # the receiver has seen 3 transfers and grants 10 more, draining: 2 come, the rest is used up
        stream.credit(c, 3, 10, True, False)
        assert [m.seq for m in c.got] == [0, 1, 2, 3, 4]
        assert c.replies == [(13, 0, 0, True)]  # 3 + 10: the receiver's limit
        # at the end, with credit: the next commit is delivered at once
        stream.credit(c, 13, 2, False, True)
        assert c.replies[-1] == (13, 2, 0, False)
        await publish(stream, 1, start=5)
        await until(c, lambda: len(c.got) == 6)
        assert c.got[-1].seq == 5 and c.got[-1].annotations == {readers.X_STREAM_OFFSET: 5}
        stream.delete()
        assert c.deleted

    run(main())


def test_a_long_log_is_read_in_bounded_turns(tmp_path, monkeypatch):
    monkeypatch.setattr(readers, "READ_BUDGET", 1)  # one chunk per turn
    async def main():
        stream = StreamQueue("/", "s", {}, str(tmp_path / "s"), Host(), asyncio.get_running_loop())
        for i in range(4):  # four chunks
            await publish(stream, 10, start=10 * i)
        c = Consumer()
        stream.attach_reader(c, ReadSpec.from_filter_set({"rabbitmq:stream-offset-spec": "first"}))
        stream.credit(c, 0, 100, False, False)
        assert len(c.got) == 10  # the first chunk now, the rest on later turns
        await until(c, lambda: len(c.got) == 40)
        assert [m.seq for m in c.got] == list(range(40))
        stream.close()

    run(main())


def test_publishing_to_a_deleted_stream_is_released(tmp_path):
    async def main():
        stream = StreamQueue("/", "s", {}, str(tmp_path / "s"), Host(), asyncio.get_running_loop())
        stream.delete()
        got = []
        stream.publish(QueueMessage(0, body(0)), got.append)
        assert got == [Outcome.RELEASED]
        assert not (tmp_path / "s").exists()

    run(main())


@pytest.mark.parametrize("filters", [{"rabbitmq:stream-offset-spec": -1}, {"rabbitmq:stream-filter": []},
                                     {"rabbitmq:stream-match-unfiltered": "yes"}])  # fmt: skip
def test_invalid_specs_are_refused(filters):
    from queues.base import QueueArgumentError

    with pytest.raises(QueueArgumentError):
        ReadSpec.from_filter_set(filters)


def test_age_retention_runs_on_its_timer_and_follows_a_policy(tmp_path):
    class Clock(Host):
        now = 1_000_000

        def now_ms(self) -> int:
            return self.now

    async def main():
        host = Clock()
        arguments = {"x-max-age": "10s", "x-stream-max-segment-size-bytes": 100}
        stream = StreamQueue("/", "s", arguments, str(tmp_path / "s"), host, asyncio.get_running_loop())
        assert stream._retention_timer is not None
        for i in range(5):
            await publish(stream, 1, start=i)  # a segment each (100 bytes hold one chunk)
            host.now += 1000
        assert len(stream.log.segments) == 5  # all younger than 10 s at each commit
        host.now += 7500  # the newest messages of the first three segments are now over 10 s old
        stream._retention_tick()  # what the timer runs: segments whose newest message is over 10 s old go
        assert stream.log.first_offset == 3 and stream.message_count == 2
        stream.apply_policy({**arguments, "x-max-age": "1s"})  # a policy shortens it: the newest stays
        stream._retention_tick()
        assert len(stream.log.segments) == 1 and stream.log.next_offset == 5
        stream.close()

    run(main())


@pytest.mark.parametrize("records, size", [(3, 1 << 20), (4096, 100)])
def test_a_flush_over_the_chunk_limits_is_cut_into_chunks_holding_every_record_in_order(tmp_path, monkeypatch,
                                                                                       records, size):  # fmt: skip
    """A flush holds its records as head and payload apart: cut by record count or by bytes,
    each chunk still gets whole records, in order, with their filter values."""
    from queues.stream import queue as stream_queue

    monkeypatch.setattr(stream_queue, "CHUNK_RECORDS", records)
    monkeypatch.setattr(stream_queue, "CHUNK_BYTES", size)

    async def main():
        stream = StreamQueue("/", "s", {}, str(tmp_path / "s"), Host(), asyncio.get_running_loop())
        payloads = [Message.build(f"m{i}", message_annotations={"x-stream-filter-value": f"v{i % 2}"}).payload
                    for i in range(10)]  # fmt: skip
        assert await publish_payloads(stream, payloads) == [Outcome.ACCEPTED] * 10
        segment = stream.log.segments[0]
        assert len(segment.offsets) >= 4  # 10 records in one flush, at most 3 (or ~100 bytes) a chunk
        got = []
        for i in range(len(segment.offsets)):
            ref = stream.log.chunk_for(segment.offsets[i])
            header, _ = ref.header()
            got += [(r.offset, r.routing_key, r.filter_value, r.payload) for r in ref.records(header)]
        assert got == [(i, "k", f"v{i % 2}", payloads[i]) for i in range(10)]
        stream.close()

    run(main())
