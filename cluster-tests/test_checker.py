"""The checkers (total-queue, metadata, convergence) and the history on hand-built histories
(fast, no docker)."""

from __future__ import annotations

import json
import threading

import pytest
from chaos_checker import (
    ABSENT,
    BIND,
    DECLARE_EXCHANGE,
    DELETE_EXCHANGE,
    EITHER,
    NO_REPLICA,
    PRESENT,
    UNBIND,
    check_metadata,
    check_total_queue,
    expected_state,
    fault_timeline,
    leader_disagreements,
    longest_gap,
)
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


def test_the_unmarked_copy_may_reach_its_client_after_the_marked_one():
    # two consumers through different nodes: the redelivery arrived first
    r = check_total_queue([enq(1), deq(1, start=4.653, redelivered=True, process="consumer-0"),
                           deq(1, start=4.660, process="consumer-1")])  # fmt: skip
    assert r.valid and r.redelivered_copies == 1 and r.unmarked_copies == 0
    two_unmarked = check_total_queue([enq(1), deq(1, start=1, redelivered=True), deq(1, start=2), deq(1, start=3)])
    assert not two_unmarked.valid and two_unmarked.unmarked_copies == 1 and two_unmarked.redelivered_copies == 1


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
    # confirms end at 0.1, 0.3 and 5.2 in a window 0.1..9.0: the gaps are 0.2, 4.9 and 3.8
    assert r.longest_unavailability == pytest.approx(4.9)
    assert (r.unavailable_from, r.unavailable_to) == (pytest.approx(0.3), pytest.approx(5.2))


def test_unavailability_counts_from_the_first_confirm():
    # a new quorum queue elects its first leader before anything is confirmed: not an outage
    ops = [enq(0, start=0.0, end=3.0), enq(1, start=3.0, end=3.1), enq(2, start=3.1, end=4.0)]
    r = check_total_queue(ops + [deq(v, start=10) for v in range(3)])
    assert r.longest_unavailability == pytest.approx(0.9)  # 3.1..4.0, not the 3 s before the first
    nothing_confirmed = check_total_queue([enq(0, INFO, start=1.0, end=6.0)])
    assert nothing_confirmed.longest_unavailability == pytest.approx(5.0)


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


def test_the_scenarios_are_registered_under_the_issues_names():
    from chaos_scenarios import ALIASES, QUEUE_TYPE, SCENARIOS

    # minority/majority partition, isolate the metadata leader, isolate a queue leader, kill -9 a
    # leader, pause a node past the election timeout, rolling restart, kill -9 while compacting
    assert set(SCENARIOS) == {"smoke", "minority-partition", "isolate-metadata-leader", "isolate-queue-leader",
                              "kill9-leader", "pause-leader", "rolling-restart", "kill9-compacting"}  # fmt: skip
    assert ALIASES["kill9-restart"] == "kill9-leader"
    assert QUEUE_TYPE in ("classic", "quorum")


# ---------------------------------------------------------------- metadata

X, Y, B = "exchange x", "exchange y", "binding amq.direct -> anchor k"
NODES = ("warren1", "warren2", "warren3")


def md(f, value, type=OK, start=0.0, end=None, node="warren1"):
    return Op("metadata-0", f, type, value, start, start + 0.1 if end is None else end, node)


def everywhere(*objects, but=None):
    """Every node's final view: `objects`, except on the nodes `but` maps to what they lack or add."""
    views = {n: set(objects) for n in NODES}
    for node, (lack, add) in (but or {}).items():
        views[node] = (views[node] - set(lack)) | set(add)
    return views


def test_an_acknowledged_declare_must_be_on_every_node():
    ops = [md(DECLARE_EXCHANGE, X)]
    r = check_metadata(ops, everywhere(X))
    assert r.valid and r.expected == {X: PRESENT} and (r.ok, r.failed, r.unknown) == (1, 0, 0), r.summary()

    missing = check_metadata(ops, everywhere(X, but={"warren3": ([X], [])}))
    assert not missing.valid and missing.missing == {X: ["warren3"]} and missing.violations == 1
    assert "1 acknowledged but missing: exchange x on warren3" in missing.summary()


def test_an_acknowledged_delete_must_be_gone_everywhere():
    ops = [md(DECLARE_EXCHANGE, X, start=0), md(DELETE_EXCHANGE, X, start=1, node="warren2")]
    assert check_metadata(ops, everywhere()).valid
    r = check_metadata(ops, everywhere(but={"warren1": ([], [X])}))
    assert not r.valid and r.resurrected == {X: ["warren1"]}
    assert "deleted or refused but present" in r.summary()


def test_a_refused_declare_never_retried_must_be_absent():
    ops = [md(DECLARE_EXCHANGE, X, FAIL)]
    r = check_metadata(ops, everywhere())
    assert r.valid and r.expected == {X: ABSENT} and r.failed == 1
    applied_anyway = check_metadata(ops, everywhere(X))
    assert not applied_anyway.valid and applied_anyway.resurrected == {X: list(NODES)}
    assert "exchange x: declare-exchange fail via warren1 t=0.00..0.10s" in applied_anyway.summary()


def test_a_refused_declare_retried_with_success_must_be_present():
    ops = [md(DECLARE_EXCHANGE, X, FAIL, start=0), md(DECLARE_EXCHANGE, X, start=1, node="warren2")]
    assert expected_state(ops) == PRESENT
    assert check_metadata(ops, everywhere(X)).valid
    assert not check_metadata(ops, everywhere()).valid


def test_a_refused_delete_leaves_the_object():
    ops = [md(DECLARE_EXCHANGE, X, start=0), md(DELETE_EXCHANGE, X, FAIL, start=1)]
    assert expected_state(ops) == PRESENT
    assert not check_metadata(ops, everywhere()).valid


def test_unknown_outcomes_allow_either():
    unknown_declare = [md(DECLARE_EXCHANGE, X, INFO)]
    unknown_delete = [md(DECLARE_EXCHANGE, X, start=0), md(DELETE_EXCHANGE, X, INFO, start=1)]
    refused_then_unknown = [md(DECLARE_EXCHANGE, X, FAIL, start=0), md(DECLARE_EXCHANGE, X, INFO, start=1)]
    for ops in (unknown_declare, unknown_delete, refused_then_unknown):
        assert expected_state(ops) == EITHER
        assert check_metadata(ops, everywhere(X)).valid
        assert check_metadata(ops, everywhere()).valid
        # even on some nodes and not others: the checker holds acknowledged changes only
        assert check_metadata(ops, everywhere(X, but={"warren2": ([X], [])})).unknown == 1


def test_an_unknown_op_overlapping_the_last_acknowledged_one_allows_either():
    ops = [md(DECLARE_EXCHANGE, X, start=0, end=2), md(DELETE_EXCHANGE, X, INFO, start=1, end=6)]
    assert expected_state(ops) == EITHER


def test_an_unknown_op_that_ended_before_a_later_acknowledged_one_is_superseded():
    ops = [md(DECLARE_EXCHANGE, X, INFO, start=0, end=1), md(DELETE_EXCHANGE, X, start=2, end=3)]
    assert expected_state(ops) == ABSENT
    assert not check_metadata(ops, everywhere(X)).valid


def test_acknowledged_changes_of_opposite_kinds_that_overlap_allow_either():
    ops = [md(DECLARE_EXCHANGE, X, start=0, end=3), md(DELETE_EXCHANGE, X, start=1, end=2, node="warren2")]
    assert expected_state(ops) == EITHER
    same_kind = [md(DECLARE_EXCHANGE, X, start=0, end=3), md(DECLARE_EXCHANGE, X, start=1, end=2)]
    assert expected_state(same_kind) == PRESENT


def test_the_last_acknowledged_change_wins_whatever_the_record_order():
    ops = [md(DELETE_EXCHANGE, X, start=5), md(DECLARE_EXCHANGE, X, start=0), md(DECLARE_EXCHANGE, X, FAIL, start=9)]
    assert expected_state(ops) == ABSENT


def test_bindings_are_checked_like_exchanges():
    ops = [md(DECLARE_EXCHANGE, Y, start=0), md(BIND, B, start=1), md(UNBIND, B, start=2)]
    assert check_metadata(ops, everywhere(Y)).valid
    r = check_metadata(ops, everywhere(Y, but={"warren3": ([Y], [B])}))
    assert r.missing == {Y: ["warren3"]} and r.resurrected == {B: ["warren3"]} and r.violations == 2


def test_objects_no_op_touched_and_other_ops_are_ignored():
    ops = [md(DECLARE_EXCHANGE, X), Op("publisher-0", "enqueue", OK, 1, 0, 1), Op("nemesis", "heal", OK, None, 0, 1)]
    r = check_metadata(ops, everywhere(X, "exchange amq.direct", "exchange left-by-another-run"))
    assert r.valid and r.ops == 1 and r.objects == 1


def test_a_node_not_read_makes_the_check_fail():
    views = everywhere(X)
    views["warren2"] = None
    r = check_metadata([md(DECLARE_EXCHANGE, X)], views)
    assert not r.valid and r.unread == ["warren2"] and r.violations == 0
    assert "no final read from warren2" in r.summary()


def test_metadata_summary_and_row_count_outcomes():
    ops = [md(DECLARE_EXCHANGE, "exchange a", OK), md(DECLARE_EXCHANGE, "exchange b", FAIL),
           md(DECLARE_EXCHANGE, "exchange c", INFO), md(BIND, B, OK, start=1)]  # fmt: skip
    r = check_metadata(ops, everywhere("exchange a"))
    assert r.as_row() == {"md_ok": 2, "md_failed": 1, "md_unknown": 1, "md_violations": 1, "md_valid": False}
    assert r.summary().splitlines()[0] == (
        "metadata changes 4 (ok 2, failed 1, unknown 1) on 4 objects: 2 must exist, 1 must not, 1 either"
    )
    assert "metadata violations 1" in r.summary()


def test_metadata_outcomes_from_http_errors():
    import urllib.error

    from chaos_cluster import ClusterError, HttpError
    from chaos_workload import change_outcome

    no_majority = {"error": "service_unavailable", "reason": "metadata change not committed: cluster has no "
                   "majority: 1 of 3 members reachable"}  # fmt: skip
    assert change_outcome(HttpError(503, no_majority)) == (FAIL, 503)
    assert change_outcome(HttpError(503, {"reason": "not committed within 5s (3 of 3 reachable)"})) == (INFO, 503)
    assert change_outcome(HttpError(404, {"error": "not_found"})) == (FAIL, 404)
    assert change_outcome(HttpError(500, "boom")) == (INFO, 500)
    assert change_outcome(urllib.error.URLError(ConnectionRefusedError(111, "refused"))) == (FAIL, 0)
    assert change_outcome(urllib.error.URLError(OSError(113, "No route to host"))) == (FAIL, 0)
    assert change_outcome(ClusterError("warren2 has no address")) == (FAIL, 0)
    assert change_outcome(TimeoutError("timed out")) == (INFO, 0)
    assert change_outcome(urllib.error.URLError(TimeoutError("timed out"))) == (INFO, 0)
    assert change_outcome(ConnectionResetError(104, "reset")) == (INFO, 0)


# ---------------------------------------------------------------- convergence


def test_groups_converge_when_every_node_names_one_leader_among_them():
    views = {n: {"metadata": "warren2", "queue q": "warren1"} for n in NODES}
    assert leader_disagreements(views) == {}


def test_groups_whose_nodes_disagree_or_name_no_leader_have_not_converged():
    views = {n: {"metadata": "warren2", "queue q": "warren1", "queue r": "warren3"} for n in NODES}
    views["warren3"] = {**views["warren3"], "queue q": "warren3"}  # still thinks it leads
    views["warren1"] = {**views["warren1"], "metadata": None}  # a candidate
    why = leader_disagreements(views)
    assert set(why) == {"metadata", "queue q"}
    assert "warren3 names warren3" in why["queue q"] and "warren1 names None" in why["metadata"]


def test_only_the_nodes_holding_a_group_are_asked_for_its_leader():
    # five nodes, a queue of three replicas: warren4 and warren5 hold none and leave it out
    views = {n: {"metadata": "warren1", "queue q": "warren2"} for n in NODES}
    views |= {n: {"metadata": "warren1", "queue q": NO_REPLICA} for n in ("warren4", "warren5")}
    assert leader_disagreements(views) == {}
    views["warren4"] = {"metadata": "warren1", "queue q": "warren4"}  # a stale replica that thinks it leads
    assert "warren4 names warren4" in leader_disagreements(views)["queue q"]


def test_a_leader_outside_the_nodes_or_a_silent_node_is_no_convergence():
    gone = {n: {"queue q": "warren4"} for n in NODES}
    assert "not one of them" in leader_disagreements(gone)["queue q"]
    silent = {"warren1": {"queue q": "warren1"}, "warren2": {"queue q": "warren1"}, "warren3": None}
    assert leader_disagreements(silent) == {"queue q": "no answer from warren3"}
    assert leader_disagreements({n: None for n in NODES}) == {"*": "no answer from warren1, warren2, warren3"}


def test_a_node_that_lacks_a_group_has_not_converged():
    views = {n: {"queue q": "warren1"} for n in NODES}
    views["warren2"] = {}
    assert "warren2 names (no such group)" in leader_disagreements(views)["queue q"]


# ---------------------------------------------------------------- reports


def test_the_final_metadata_read_waits_for_followers_then_fails_past_its_timeout():
    from chaos_report import Report, results_table

    h = History()
    h.add(md(DECLARE_EXCHANGE, X))
    lagging = iter([everywhere(but={"warren2": ([], [])}), everywhere(X, but={"warren2": ([X], [])})])
    report = Report("demo", h)
    m = report.check_metadata(lambda: next(lagging, everywhere(X)), timeout=5)
    assert m.valid and report.ok and report.timings["metadata visible on every node"] < 5

    stuck = Report("stuck", h)
    m = stuck.check_metadata(lambda: everywhere(X, but={"warren3": ([X], [])}), timeout=0.3)
    assert not m.valid and not stuck.ok and "exchange x on warren3" in stuck.failed[0].detail
    assert "metadata INVALID" in stuck.text()
    table = results_table([report, stuck])
    assert "| demo | ok |" in table and "| stuck | FAILED |" in table and "| 1/0/0 | 1 |" in table


NO_MAJORITY = "HttpError: HTTP 503: {'reason': 'metadata change not committed: cluster has no majority: 1 of 3'}"


def refused(f, value, status=503, error=NO_MAJORITY, start=1.0):
    return Op("metadata-0", f, FAIL, value, start, start + 5, "warren3", error, {"status": status})


def test_a_change_refused_for_no_majority_that_is_applied_anyway_is_a_violation():
    # a 503 "no majority" promises nothing changed: a delete so answered must leave X in place
    ops = [md(DECLARE_EXCHANGE, X, start=0), refused(DELETE_EXCHANGE, X)]
    assert not check_metadata(ops, everywhere()).valid
    h = History()
    for op in ops:
        h.add(op)
    from chaos_report import Report

    report = Report("refused", h)
    report.check_metadata(lambda: everywhere(), timeout=1)
    assert not report.ok


def _stream_history(reads: list[int]) -> list:
    from chaos_history import Op

    ops = [Op("publisher-0", "enqueue", "ok", v, v, v + 0.5) for v in (1, 3, 5)]
    ops += [Op("publisher-1", "enqueue", "ok", v, v, v + 0.5) for v in (2, 4)]
    ops += [Op("consumer-0", "dequeue", "ok", v, 10 + i, 10.1 + i) for i, v in enumerate(reads)]
    return ops


def test_stream_order_holds_when_each_publisher_reads_back_in_order():
    from chaos_checker import check_stream_order

    result = check_stream_order(_stream_history([1, 2, 3, 5, 4]))  # publishers interleave freely
    assert result.valid and result.read == 5


def test_stream_order_finds_a_publisher_read_out_of_order_and_a_value_read_twice():
    from chaos_checker import check_stream_order

    result = check_stream_order(_stream_history([1, 5, 3, 2, 2]))
    assert result.out_of_order == [("publisher-0", 3, 5)]
    assert result.duplicated == {2}
    assert not result.valid and len(result.problems()) == 2


def _rpc(process, f, value, type=OK, t=0.0):
    from chaos_history import Op

    return Op(process, f, type, value, t, t + 0.1)


def test_rpc_replies_received_or_counted_dropped():
    from chaos_rpc import check_rpc

    ops = [_rpc("requester-0", "request", 1), _rpc("requester-1", "request", 2), _rpc("requester-0", "request", 3),
           _rpc("responder-0", "reply-sent", 1), _rpc("responder-0", "reply-sent", 2),
           _rpc("requester-0", "reply", 1), _rpc("requester-1", "requester-lost", None, "info")]  # fmt: skip
    r = check_rpc(ops)
    assert r.valid and (r.requests, r.replies_sent, r.received, r.dropped, r.unanswered) == (3, 2, 1, 1, 1)


def test_rpc_a_reply_to_another_requester_or_received_twice_is_a_violation():
    from chaos_rpc import check_rpc

    ops = [_rpc("requester-0", "request", 1), _rpc("responder-0", "reply-sent", 1),
           _rpc("requester-1", "reply", 1), _rpc("requester-1", "reply", 1), _rpc("requester-0", "reply", 9)]  # fmt: skip
    r = check_rpc(ops)
    assert r.misrouted == [(1, "requester-1", "requester-0")] * 2
    assert r.extra == [1, 9] and not r.valid and len(r.problems()) == 2


def test_rpc_a_reply_whose_send_timed_out_may_still_arrive():
    from chaos_rpc import check_rpc

    ops = [_rpc("requester-0", "request", 1), _rpc("responder-0", "reply-sent", 1, "info"),
           _rpc("requester-0", "reply", 1)]  # fmt: skip
    r = check_rpc(ops)
    assert r.valid and (r.received, r.dropped, r.unanswered) == (1, 0, 0)
