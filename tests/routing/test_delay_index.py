"""The delayed messages' pure index (routing/delay_index.py): due order, the
bounded window with the rest spilled to disk, in-flight messages, retries and
reloads; and reading x-delay and x-delayed-type (routing/delayed.py)."""

from __future__ import annotations

import random

import pytest

from amqp.message import Message
from routing.delay_index import Delay, DelayIndex, Reload, Retry, Routed, Routing
from routing.delayed import check_arguments, delay_of
from routing.errors import PreconditionFailed


class Disk:
    """What the host keeps on disk: (due, ref) per stored message, as its index."""

    def __init__(self) -> None:
        self.rows: dict[int, int] = {}

    def entries(self) -> tuple[tuple[int, int], ...]:
        return tuple((due, ref) for ref, due in self.rows.items())


def drain(index: DelayIndex, disk: Disk, now: int, batch: int = 7) -> list[tuple[int, int]]:
    """Routes everything due by `now` as the host does, reloading when the window runs dry."""
    out = []
    while True:
        if index.needs_reload:
            index.apply(Reload(disk.entries()))
        due = index.due(now, batch)
        if not due:
            return out
        index.apply(Routing(tuple(ref for _, ref in due)))
        for _, ref in due:
            del disk.rows[ref]
        index.apply(Routed(tuple(ref for _, ref in due)))
        out += due
        assert index.in_memory <= index.window_size


def test_due_messages_come_out_in_due_order_whatever_order_they_came_in():
    index, disk = DelayIndex(window=1000), Disk()
    dues = [500, 100, 300, 100, 200]
    for ref, due in enumerate(dues):
        disk.rows[ref] = due
        index.apply(Delay(ref, due))
    assert index.next_due() == 100 and len(index) == 5
    assert index.due(99, 10) == []
    assert drain(index, disk, 250) == [(100, 1), (100, 3), (200, 4)]
    assert index.next_due() == 300 and len(index) == 2
    assert drain(index, disk, 10_000) == [(300, 2), (500, 0)]
    assert len(index) == 0 and index.next_due() is None


def test_a_million_delays_keep_only_the_window_in_memory_and_still_come_out_in_order():
    rng = random.Random(7)
    index, disk = DelayIndex(window=64), Disk()
    n = 20_000  # the bound is the window's, not n's: the same holds for millions
    for ref in range(n):
        due = rng.randrange(1_000_000)
        disk.rows[ref] = due
        index.apply(Delay(ref, due))
        assert index.in_memory <= 64
    assert len(index) == n and index.spilled == n - 64
    out = drain(index, disk, 2_000_000, batch=50)
    assert len(out) == n and out == sorted(out)


def test_a_message_due_earlier_than_the_window_enters_it_and_pushes_the_latest_to_disk():
    index, disk = DelayIndex(window=3), Disk()
    for ref, due in enumerate([10, 20, 30, 40]):
        disk.rows[ref] = due
        index.apply(Delay(ref, due))
    assert index.spilled == 1 and index.in_memory == 3
    disk.rows[9] = 5
    index.apply(Delay(9, 5))
    assert index.due(100, 10) == [(5, 9), (10, 0), (20, 1)]  # 30 was pushed out
    assert index.spilled == 2
    assert [ref for _, ref in drain(index, disk, 100)] == [9, 0, 1, 2, 3]


def test_messages_in_flight_stay_counted_are_skipped_by_a_reload_and_come_back_on_retry():
    index, disk = DelayIndex(window=2), Disk()
    for ref, due in enumerate([10, 20, 30]):
        disk.rows[ref] = due
        index.apply(Delay(ref, due))
    index.apply(Routing((0, 1)))  # the host routes them; the targets have not confirmed yet
    assert len(index) == 3 and index.in_flight == 2 and index.needs_reload
    index.apply(Reload(disk.entries()))  # both still on disk: not loaded twice
    assert index.due(100, 10) == [(30, 2)] and index.spilled == 0
    index.apply(Retry(((10, 0),)))  # a target lost it: routed again
    index.apply(Routed((1,)))
    assert index.due(100, 10) == [(10, 0), (30, 2)] and len(index) == 2


def test_commands_applied_in_the_same_order_give_the_same_state():
    commands = [Delay(1, 50), Delay(2, 10), Delay(3, 30), Routing((2,)), Retry(((10, 2),)), Routing((2,)), Routed((2,))]
    a, b = DelayIndex(window=2), DelayIndex(window=2)
    for command in commands:
        a.apply(command)
        b.apply(command)
    assert a.due(10**9, 10) == b.due(10**9, 10) == [(30, 3)] and a.spilled == b.spilled == 1
    with pytest.raises(TypeError):
        a.apply("nonsense")  # type: ignore[arg-type]


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
