"""A stream reader with an SQL filter on a real StreamQueue: only matching
messages are delivered and take credit, and examining messages counts
against the reader's per-turn budget so a selective filter yields the loop."""

from __future__ import annotations

import asyncio

from amqp.message import Message
from amqp.types import Symbol
from queues.stream import readers
from queues.stream.queue import StreamQueue
from queues.stream.spec import FILTERED_MESSAGE_COST, ReadSpec

from .stream_fakes import Consumer, Host, publish_payloads, until


async def publish_numbered(stream: StreamQueue, n: int) -> None:
    await publish_payloads(stream, (Message.build(f"m{i}", application_properties={"n": i}).payload for i in range(n)))


def spec(sql: str) -> ReadSpec:
    return ReadSpec.from_filter_set({"rabbitmq:stream-offset-spec": "first", Symbol("amqp:sql-filter"): sql})


def test_only_matching_messages_take_credit(tmp_path):
    async def main():
        stream = StreamQueue("/", "s", {}, str(tmp_path / "s"), Host(), asyncio.get_running_loop())
        await publish_numbered(stream, 50)
        c = Consumer()
        stream.attach_reader(c, spec("n % 10 = 0 OR n IN (7, 49)"))
        stream.credit(c, 0, 4, False, False)
        await until(c, lambda: len(c.got) == 4)
        assert [m.seq for m in c.got] == [0, 7, 10, 20]
        stream.credit(c, 4, 10, True, False)  # drain: the 4 left, then the credit is used up at the end
        await until(c, lambda: c.replies and c.replies[-1][3])
        assert [m.seq for m in c.got] == [0, 7, 10, 20, 30, 40, 49]
        stream.close()

    asyncio.run(main())


def test_examining_messages_counts_against_the_turn(tmp_path):
    """3,000 small messages are far less than READ_BUDGET bytes: without counting the filter's
    work, one turn would test them all; with it a turn tests READ_BUDGET / FILTERED_MESSAGE_COST."""
    per_turn = readers.READ_BUDGET // FILTERED_MESSAGE_COST
    assert per_turn < 3_000

    async def main():
        stream = StreamQueue("/", "s", {}, str(tmp_path / "s"), Host(), asyncio.get_running_loop())
        await publish_numbered(stream, 3_000)
        c = Consumer()
        assert stream.log.bytes < readers.READ_BUDGET  # so bytes alone would let one turn read them all
        stream.attach_reader(c, spec("n = 10 OR n = 2999"))
        stream.credit(c, 0, 10, False, False)  # this turn examines at most per_turn of them
        assert [m.seq for m in c.got] == [10]
        await until(c, lambda: len(c.got) == 2)  # the other on a later turn
        assert c.got[-1].seq == 2999
        stream.close()

    asyncio.run(main())


def test_a_turn_examines_at_least_one_message_however_costly(tmp_path, monkeypatch):
    """An expression may cost more than a whole turn's budget: the reader still
    examines one message per turn instead of rescheduling itself forever."""
    monkeypatch.setattr(readers, "READ_BUDGET", 1)

    async def main():
        stream = StreamQueue("/", "s", {}, str(tmp_path / "s"), Host(), asyncio.get_running_loop())
        await publish_numbered(stream, 20)
        c = Consumer()
        stream.attach_reader(c, spec("n >= 0 AND p.subject IS NULL"))
        stream.credit(c, 0, 20, False, False)
        assert len(c.got) <= 1
        await until(c, lambda: len(c.got) == 20)
        assert [m.seq for m in c.got] == list(range(20))
        stream.close()

    asyncio.run(main())


def test_costlier_expressions_count_for_more():
    cheap, more_nodes = spec("n = 1"), spec("n = 1 OR n = 2 OR n = 3")
    like_nfa, like_segments = spec("s LIKE 'a_b%'"), spec("s LIKE 'a%b%'")
    assert 0 < cheap.message_cost < more_nodes.message_cost
    assert cheap.message_cost_per_byte == like_segments.message_cost_per_byte == 0  # str.find: C, not per step
    assert like_nfa.message_cost_per_byte > 0
    unfiltered = ReadSpec.from_filter_set({"rabbitmq:stream-offset-spec": "first"})
    assert unfiltered.message_cost == unfiltered.message_cost_per_byte == 0  # the plain path is unchanged
