"""Issue 14, row 5: DISPOSITION ranges cost O(log n + k) for the k deliveries
they name, not O(unsettled): 500 frames over 100k unsettled deliveries froze
the node for 6 s. Correct across the 2^32 wrap of delivery ids."""

from __future__ import annotations

import pytest
from engine_helpers import Pair, frame
from hypothesis import given, settings
from hypothesis import strategies as st

from amqp import definitions as d
from amqp import events as ev
from amqp import serial, unsettled
from amqp.unsettled import UnsettledMap

TOP = 1 << 32


@pytest.fixture
def serial_calls(monkeypatch):
    """Every call into amqp/serial.py from now on: the old settle scanned the
    unsettled map (or the range) with one or two calls per id."""
    calls = [0]
    for name in ("add", "diff", "lt", "le", "in_range"):
        real = getattr(serial, name)

        def counting(*args, _real=real):
            calls[0] += 1
            return _real(*args)

        monkeypatch.setattr(serial, name, counting)
    return calls


def sending_server(n: int, first_id: int = 0):
    """A pair where the server has sent n unsettled deliveries to the
    client's receiver, ids from first_id; returns (pair, server session, deliveries)."""
    pair = Pair(server_kw={"max_frame_size": 1 << 20}, client_kw={"max_frame_size": 1 << 20})
    pair.connect()
    cs, ss = pair.begin(client_kw={"incoming_window": n + 10}, server_kw={"incoming_window": n + 10})
    ss.next_delivery_id = first_id
    cl, sl = pair.attach(cs, ss, "r", d.RECEIVER)
    cl.flow(link_credit=n)
    pair.pump()
    sent = [sl.send(i.to_bytes(4, "big"), b"\x00Su\xa0\x01x") for i in range(n)]
    pair.pump(limit=10_000)
    assert len(ss.outgoing_unsettled) == n
    return pair, ss, sent


def dispositions(ranges: list[tuple[int, int]], settled: bool = True) -> bytes:
    return b"".join(frame(d.Disposition(role=d.RECEIVER, first=f, last=last, settled=settled, state=d.Accepted()))
                    for f, last in ranges)  # fmt: skip


def settled_ids(events: list) -> list[int]:
    return [x.id for e in events if type(e) is ev.DeliveriesUpdated for x in e.deliveries]


def test_wide_ranges_over_many_unsettled_cost_no_scan(serial_calls):
    n = 20_000
    pair, ss, sent = sending_server(n)
    # 500 ranges as wide as allowed, none naming an unsettled delivery
    # (ids n.. have never been used), then 500 that each settle 10
    empty = [(n + 1000 * i, (n + 1000 * i + serial.HALF - 1) % TOP) for i in range(500)]
    settle = [(i * 40, i * 40 + 9) for i in range(500)]
    serial_calls[0] = 0
    events = pair.server.receive_data(dispositions(empty))
    assert settled_ids(events) == []
    assert serial_calls[0] <= 500 * 2
    serial_calls[0] = 0
    events = pair.server.receive_data(dispositions(settle))
    assert settled_ids(events) == [i * 40 + j for i in range(500) for j in range(10)]
    assert serial_calls[0] <= 500 * 2
    assert len(ss.outgoing_unsettled) == n - 5000


def test_ranges_across_the_wrap_settle_exactly_what_they_name():
    first = TOP - 300
    pair, ss, sent = sending_server(600, first_id=first)
    assert sent[0].id == first and sent[-1].id == 299
    events = pair.server.receive_data(dispositions([(TOP - 5, 4)]))
    assert settled_ids(events) == [TOP - 5 + i for i in range(5)] + list(range(5))
    events = pair.server.receive_data(dispositions([(TOP - 10, 10)]))  # overlaps what is settled
    assert settled_ids(events) == [TOP - 10 + i for i in range(5)] + list(range(5, 11))
    events = pair.server.receive_data(dispositions([(first, first)]))
    assert settled_ids(events) == [first]
    events = pair.server.receive_data(dispositions([(290, 310)]))
    assert settled_ids(events) == list(range(290, 300))
    remaining = set(ss.outgoing_unsettled)
    assert remaining == {x.id for x in sent} - {TOP - 10 + i for i in range(10)} - set(range(11)) - {first} \
        - set(range(290, 300))  # fmt: skip


def test_a_state_update_keeps_the_deliveries_unsettled():
    pair, ss, sent = sending_server(10)
    events = pair.server.receive_data(dispositions([(2, 4)], settled=False))
    assert settled_ids(events) == [2, 3, 4]
    assert len(ss.outgoing_unsettled) == 10 and type(sent[3].state) is d.Accepted


# -- the map against a model, across the wrap --------------------------------------

operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(1, 40)),
        st.tuples(st.just("del"), st.integers(0, 10_000)),
        st.tuples(st.just("oldest"), st.integers(1, 20)),  # settled in the order sent: the usual case
        st.tuples(st.just("range"), st.integers(-50, 400), st.integers(0, 300)),
        st.tuples(st.just("jump"), st.integers(1, 5)),  # ids skipped: the run (amqp/unsettled.py) spreads
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(start=st.sampled_from([0, TOP - 100, TOP - 1, serial.HALF - 3]), ops=operations,
       stride=st.integers(1, 3), block=st.sampled_from([2, 3, unsettled.BLOCK]))  # fmt: skip
def test_unsettled_map_matches_a_model(start, ops, stride, block):
    saved, unsettled.BLOCK = unsettled.BLOCK, block  # small blocks: splits and emptied blocks happen
    try:
        check_against_a_model(start, ops, stride)
    finally:
        unsettled.BLOCK = saved


def check_against_a_model(start, ops, stride):
    m, model = UnsettledMap(), {}
    order: list[int] = []  # ids in the order given, the serial order
    next_id = start
    for op in ops:
        if op[0] == "add":
            for _ in range(op[1]):
                m[next_id] = model[next_id] = f"d{next_id}"
                order.append(next_id)
                next_id = serial.add(next_id, stride)
        elif op[0] == "jump":
            next_id = serial.add(next_id, op[1])
        elif op[0] == "del" and model:
            victim = list(model)[op[1] % len(model)]
            assert m.pop(victim) == model.pop(victim)
        elif op[0] == "oldest":
            for victim in [i for i in order if i in model][: op[1]]:
                assert m.pop(victim) == model.pop(victim)
        elif op[0] == "range":
            first = serial.add(start, op[1])
            last = serial.add(first, op[2])
            expect = [(i, model[i]) for i in order if i in model and serial.in_range(i, first, last)]
            assert list(m.in_range(first, last)) == expect
    assert dict(m) == model
    assert list(m.in_range(start, serial.add(start, serial.HALF - 1))) == [(i, model[i]) for i in order if i in model]


def test_unsettled_map_refuses_bulk_changes():
    m = UnsettledMap()
    with pytest.raises(TypeError):
        m.update({1: 2})
    m[5] = "x"
    assert m.pop(6, None) is None
    with pytest.raises(KeyError):
        m.pop(6)
    m.clear()
    assert m == {} and list(m.in_range(0, 10)) == []


def test_a_run_answers_ranges_at_its_edges_and_spreads_only_when_it_must():
    """The map holds ids given in order as one run (amqp/unsettled.py); a range ending exactly
    at its first id, or starting at its last, names that one delivery."""
    first = TOP - 2
    m = UnsettledMap()
    for i in range(5):
        m[serial.add(first, i)] = i
    assert not m._spread
    assert list(m.in_range(serial.add(first, -10), first)) == [(first, 0)]
    assert list(m.in_range(2, serial.add(2, 40))) == [(2, 4)]
    assert list(m.in_range(3, 9)) == [] and list(m.in_range(serial.add(first, -10), serial.add(first, -1))) == []
    assert m.pop(first) == 0 and m.pop(2) == 4 and not m._spread  # the oldest, the newest: still a run
    assert m.pop(0) == 2 and m._spread  # from inside: keys and blocks
    assert list(m.in_range(first, 5)) == [(TOP - 1, 1), (1, 3)]
    m.pop(TOP - 1), m.pop(1)
    assert not m and not m._spread  # empty: a run again
    m[7] = "x"
    assert list(m.in_range(0, 10)) == [(7, "x")] and not m._spread
