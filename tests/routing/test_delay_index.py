"""The delayed messages' pure index (routing/delay_index.py): due order, batches,
the size of an entry; and reading x-delay and x-delayed-type (routing/delayed.py)."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from amqp.message import Message
from routing.delay_index import Delay, DelayIndex, Keep, Take
from routing.delayed import check_arguments, delay_of
from routing.errors import PreconditionFailed


def test_due_messages_come_out_in_due_order_whatever_order_they_came_in():
    index = DelayIndex()
    for ref, due in enumerate([500, 100, 300, 100, 200]):
        index.apply(Delay(ref, due))
    assert index.next_due() == 100 and len(index) == 5
    assert index.apply(Take(99, 10)) == ()
    assert index.apply(Take(250, 10)) == (1, 3, 4)  # due 100, 100 (in ref order), 200
    assert index.next_due() == 300 and len(index) == 2
    assert index.apply(Take(10_000, 1)) == (2,)  # at most `limit` a turn
    assert index.apply(Take(10_000, 10)) == (0,)
    assert len(index) == 0 and index.next_due() is None


def test_many_delays_come_out_in_order_in_batches():
    rng = random.Random(7)
    index = DelayIndex()
    dues = {ref: rng.randrange(1_000_000) for ref in range(20_000)}
    for ref, due in dues.items():
        index.apply(Delay(ref, due))
    out: list[int] = []
    now = 0
    while len(index):
        now += 50_000
        while batch := index.apply(Take(now, 500)):
            assert all(dues[ref] <= now for ref in batch)
            out += batch
    assert [dues[ref] for ref in out] == sorted(dues.values()) and len(out) == len(dues)


def test_the_index_holds_one_small_integer_per_message_never_a_body():
    """A million pending delays must not cost their bodies: each entry is the due time and
    the reference packed in one integer (tens of bytes), whatever the message's size."""
    index = DelayIndex()
    n = 100_000
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for ref in range(n):
        index.apply(Delay(1 << 40 | ref, 1_700_000_000_000 + ref))  # realistic ids and epoch-ms due times
    per_message = (tracemalloc.get_traced_memory()[0] - before) / n
    tracemalloc.stop()
    assert per_message < 64, per_message  # a 64-bit id and a due time: no tuple, no body
    assert index.entries()[:2] == [(1_700_000_000_000, 1 << 40), (1_700_000_000_001, 1 << 40 | 1)]


def test_commands_applied_in_the_same_order_give_the_same_state():
    commands = [Delay(1, 50), Delay(2, 10), Delay(3, 30), Take(20, 5), Delay(4, 5), Take(40, 1)]
    a, b = DelayIndex(), DelayIndex()
    results = [(a.apply(command), b.apply(command)) for command in commands]
    assert all(x == y for x, y in results) and results[3][0] == (2,) and results[5][0] == (4,)
    assert a.entries() == b.entries() == [(30, 3), (50, 1)]
    with pytest.raises(TypeError):
        a.apply("nonsense")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        a.apply(Delay(1 << 65, 5))  # a 64-bit id and its queue's tag bit at most


def test_keep_leaves_the_earliest_and_hands_back_the_rest_for_the_queue():
    """The scheduler's window is full: it keeps the earliest half and gives the rest back."""
    index = DelayIndex()
    for ref, due in enumerate([500, 100, 300, 100, 200, 400]):
        index.apply(Delay(ref | 1 << 64, due))  # tagged refs (the queue they came from) come back whole
    assert sorted(index.apply(Keep(3))) == [ref | 1 << 64 for ref in (0, 2, 5)]  # due 500, 300, 400
    assert len(index) == 3 and index.last_due() == 200 and index.next_due() == 100
    assert index.apply(Keep(5)) == ()  # room enough: nothing given back
    assert index.apply(Take(150, 10)) == (1 | 1 << 64, 3 | 1 << 64)  # still a heap after the cut
    assert index.apply(Keep(0)) == (4 | 1 << 64,) and index.last_due() is None
    with pytest.raises(ValueError):
        index.apply(Keep(-1))


def test_x_delay_is_read_from_the_annotation_then_the_application_property():
    assert delay_of(Message.build(b"x", message_annotations={"x-delay": 300})) == 300
    assert delay_of(Message.build(b"x", application_properties={"x-delay": 250})) == 250
    both = Message.build(b"x", message_annotations={"x-delay": 300}, application_properties={"x-delay": 9})
    assert delay_of(both) == 300
    assert delay_of(Message.build(b"x", application_properties={"x-delay": "1500"})) == 1500
    for none in (None, 0, -5, "soon", True):
        assert delay_of(Message.build(b"x", application_properties={"x-delay": none})) == 0
    assert delay_of(Message.build(b"x")) == 0


def test_x_delayed_type_is_required_and_must_be_a_routing_type():
    for good in ("direct", "fanout", "topic", "headers"):
        check_arguments({"x-delayed-type": good})
    for bad in ({}, {"x-delayed-type": "x-delayed-message"}, {"x-delayed-type": "nope"}, {"x-delayed-type": 5}):
        with pytest.raises(PreconditionFailed, match="x-delayed-type"):
            check_arguments(bad)
