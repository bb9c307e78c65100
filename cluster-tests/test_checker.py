"""The total-queue checker and the history on synthetic histories (fast, no docker)."""

from __future__ import annotations

import json
import threading

import pytest
from chaos_checker import check_total_queue, fault_timeline, longest_gap
from chaos_history import FAIL, INFO, OK, History, Op


def enq(value, type=OK, start=0.0, end=None, process="publisher-0"):
    return Op(process, "enqueue", type, value, start, start + 0.01 if end is None else end)


def deq(value, start=1.0, redelivered=False, type=OK, process="consumer-0"):
    return Op(process, "dequeue", type, value, start, start + 0.01, meta={"redelivered": redelivered})


def test_a_clean_history_is_valid():
    ops = [enq(i, start=i * 0.1) for i in range(10)] + [deq(i, start=2 + i * 0.1) for i in range(10)]
    r = check_total_queue(ops)
    assert r.valid, r.summary()
    assert (r.attempted, r.confirmed, r.consumed, r.deliveries) == (10, 10, 10, 10)
    assert not (r.lost or r.unexpected or r.duplicated or r.resurrected)
    assert "valid" in r.summary().splitlines()[-1]


def test_confirmed_but_never_consumed_is_lost():
    r = check_total_queue([enq(1), enq(2), enq(3), deq(1), deq(3)])
    assert not r.valid
    assert r.lost == {2}
    assert "1 lost: 2" in r.summary()


def test_consumed_but_never_published_is_unexpected():
    r = check_total_queue([enq(1), deq(1), deq(99)])
    assert not r.valid and r.unexpected == {99} and not r.lost


def test_unknown_outcomes_may_be_lost_or_recovered():
    ops = [enq(1), enq(2, INFO), enq(3, INFO), deq(1), deq(2)]
    r = check_total_queue(ops)
    assert r.valid, r.summary()
    assert r.indeterminate == 2 and r.recovered == {2} and not r.lost


def test_a_failed_publish_that_is_consumed_is_resurrected():
    r = check_total_queue([enq(1, FAIL), enq(2, FAIL), deq(1)])
    assert not r.valid and r.resurrected == {1} and r.failed == 2


def test_duplicates_are_allowed_only_as_redeliveries():
    marked = check_total_queue([enq(1), deq(1, start=1), deq(1, start=2, redelivered=True)])
    assert marked.valid, marked.summary()
    assert marked.duplicated == {1: 2} and marked.redelivered_copies == 1 and marked.unmarked_copies == 0

    unmarked = check_total_queue([enq(1), deq(1, start=1), deq(1, start=2)])
    assert not unmarked.valid
    assert unmarked.unmarked == {1} and unmarked.unmarked_copies == 1
    assert "without a redelivery mark" in unmarked.summary()
    assert check_total_queue([enq(1), deq(1, start=1), deq(1, start=2)], allow_unmarked_duplicates=True).valid


def test_the_first_copy_is_the_earliest_whatever_the_record_order():
    # the redelivered copy completed first in the list, but started later
    r = check_total_queue([enq(1), deq(1, start=5, redelivered=True), deq(1, start=1)])
    assert r.valid and r.redelivered_copies == 1


def test_a_dequeue_whose_ack_failed_still_counts_as_consumed():
    r = check_total_queue([enq(1), deq(1, type=INFO)])
    assert r.valid and r.consumed == 1
    # but a dequeue that failed (or found nothing) is no delivery
    r = check_total_queue([enq(1), deq(None), deq(1, type=FAIL)])
    assert r.lost == {1} and r.deliveries == 0


def test_longest_unavailability_is_the_longest_stretch_without_a_confirm():
    ops = [enq(0, start=0.0, end=0.1), enq(1, start=0.2, end=0.3), enq(2, INFO, start=0.4, end=5.0),
           enq(3, start=5.1, end=5.2), enq(4, FAIL, start=5.3, end=9.0)]  # fmt: skip
    r = check_total_queue(ops + [deq(v, start=10) for v in (0, 1, 3)])
    assert r.valid
    # confirms end at 0.1, 0.3 and 5.2 in a window 0.0..9.0: the gaps are 0.1, 0.2, 4.9 and 3.8
    assert r.longest_unavailability == pytest.approx(4.9)
    assert (r.unavailable_from, r.unavailable_to) == (pytest.approx(0.3), pytest.approx(5.2))


def test_longest_gap_counts_the_edges():
    assert longest_gap([], 0, 10) == (10, 0, 10)
    assert longest_gap([1, 2, 3], 0, 10) == (7, 3, 10)
    assert longest_gap([4, 5], 0, 6) == (4, 0, 4)
    assert longest_gap([-1, 20], 0, 5) == (5, 0, 5)  # points outside the window are ignored


def test_no_enqueues_no_unavailability():
    r = check_total_queue([])
    assert r.valid and r.longest_unavailability == 0 and r.attempted == 0


def test_summary_row():
    r = check_total_queue([enq(1), enq(2), deq(1), deq(1, start=2, redelivered=True)])
    row = r.as_row()
    assert row["published"] == 2 and row["lost"] == 1 and row["duplicated"] == 1 and row["valid"] is False


def test_history_times_operations_and_marks_exceptions_unknown(tmp_path):
    clock = iter([100.0, 101.0, 101.5, 102.0, 103.0, 104.0]).__next__
    h = History(clock=clock)  # origin 100
    with h.op("nemesis", "kill9", "warren2", node="warren2") as op:
        op.ok()
    with pytest.raises(RuntimeError):
        with h.op("nemesis", "partition", "warren3"):
            raise RuntimeError("iptables: not found")
    kill, part = h.ops()
    assert (kill.type, kill.start, kill.end, kill.node) == (OK, 1.0, 1.5, "warren2")
    assert part.type == INFO and part.error == "RuntimeError: iptables: not found"
    assert (part.start, part.end) == (2.0, 3.0)
    assert h.faults() == [kill, part]
    assert "kill9 warren2: ok" in fault_timeline(h.ops())
    path = tmp_path / "history.jsonl"
    h.dump(path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["f"] == "kill9" and lines[1]["error"].startswith("RuntimeError")


def test_history_record_and_filters_are_thread_safe():
    h = History()

    def worker(p):
        for i in range(500):
            h.record(f"publisher-{p}", "enqueue", OK, (p, i))

    threads = [threading.Thread(target=worker, args=(p,)) for p in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(h) == 2000
    assert len(h.ops(process="publisher-2")) == 500
    assert len(h.ops(f="enqueue", type=OK)) == 2000 and h.ops(type=FAIL) == []


def test_an_op_type_must_be_known():
    with pytest.raises(ValueError):
        Op("p", "enqueue", "maybe", 1, 0, 0)


def test_the_scenarios_are_registered():
    from chaos_scenarios import QUEUE_TYPE, SCENARIOS

    assert set(SCENARIOS) >= {"smoke", "kill9-restart", "pause-leader", "minority-partition", "rolling-restart"}
    assert QUEUE_TYPE in ("classic", "quorum")
