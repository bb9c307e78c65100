"""The Spark jobs on generated snapshot sets (snapgen.py): every fault the scenario
places is found, at the window where it is, and nothing else; the healthy set raises
no alarm. Times compare as window starts: snapgen.ms(w) is the start of window w."""

from __future__ import annotations

import pytest
from snapgen import QQ, ms

pytestmark = pytest.mark.slow


def rows(audited, name, *keys):
    return sorted(tuple(r[k] for k in keys) for r in audited[name])


# ------------------------------------------------------------------ input


def test_reading_every_file_of_every_node(faulty):
    snap = faulty.snap
    assert faulty.written["files"] >= 3 * 3  # rotated: several files per node, read recursively
    assert snap.nodes == ["n1", "n2", "n3"]
    assert snap.member_names == {"n1:25672": "n1", "n2:25672": "n2", "n3:25672": "n3"}
    assert snap.period_ms == 5000  # from the records' interval_ms
    assert snap.bad_lines == 1  # n3's torn last line before its restart
    assert snap.newer_records == 1  # a record of schema_version 2: skipped, counted
    assert snap.lines == faulty.written["records"] + 2
    assert snap.last_window - snap.first_window + 1 == 125


# ------------------------------------------------------------------ partitions


def test_partitions_are_found_to_the_window(faulty):
    assert rows(faulty, "partitions", "start_ms", "end_ms", "components") == [
        (ms(30), ms(45), [["n1"], ["n2", "n3"]]),
        (ms(115), ms(119), [["n1"], ["n2"], ["n3"]]),
    ]


def test_the_topology_covers_every_window_and_shows_the_silent_node(faulty):
    topo = rows(faulty, "topology", "start_ms", "end_ms", "n_components", "silent")
    assert topo == [
        (ms(0), ms(30), 1, []), (ms(30), ms(45), 2, []), (ms(45), ms(90), 1, []),
        (ms(90), ms(93), 1, ["n3"]),  # n3 crashed during window 90: nobody reaches it, it wrote nothing
        (ms(93), ms(115), 1, []), (ms(115), ms(119), 3, []), (ms(119), ms(125), 1, []),
    ]  # fmt: skip
    windows = faulty["windows"]
    assert len(windows) == 125
    w91 = next(r for r in windows if r["start_ms"] == ms(91))
    assert w91["present"] == ["n1", "n2"] and w91["silent"] == ["n3"]


def test_one_way_reachability_is_reported_and_splits_nothing(faulty):
    assert rows(faulty, "asymmetries", "src", "dst", "start_ms", "end_ms") == [("n1", "n3", ms(20), ms(25))]


def test_split_brain_two_leaders_in_one_term(faulty):
    assert rows(faulty, "split_brains", "group", "term", "leaders", "overlap_start_ms", "overlap_end_ms") == [
        (QQ, 3, ["n1", "n3"], ms(70), ms(75))]
    terms = {(r["group"], r["term"]): r["leaders"] for r in faulty["terms"]}
    assert terms == {
        ("metadata", 1): ["n1"], ("metadata", 2): ["n2"], ("metadata", 3): ["n2"],
        (QQ, 1): ["n2"], (QQ, 2): ["n3"], (QQ, 3): ["n1", "n3"], (QQ, 4): ["n3"], (QQ, 5): ["n1"], (QQ, 6): ["n1"],
    }  # fmt: skip


def test_leader_changes(faulty):
    assert rows(faulty, "leader_changes", "group", "at_ms", "from_leader", "to_leader", "to_term") == [
        ("metadata", ms(32), "n1", "n2", 2),
        (QQ, ms(60), "n2", "n3", 2),
        (QQ, ms(91), "n3", "n1", 5),
    ]


def test_time_without_a_leader(faulty):
    assert rows(faulty, "leaderless", "group", "start_ms", "end_ms", "duration_ms") == [
        ("metadata", ms(30), ms(32), 10000),
        ("metadata", ms(115), ms(119), 20000),
        (QQ, ms(90), ms(91), 5000),  # its leader n3 crashed; n1 won the election in window 91
        (QQ, ms(115), ms(119), 20000),
    ]


def test_growing_replica_lag_of_the_partitioned_follower(faulty):
    assert rows(faulty, "lag_growth", "group", "follower", "start_ms", "end_ms") == [
        ("metadata", "n1", ms(33), ms(45)),  # no leader in 30-31; from 32 on n2 leads and n1 falls behind
        (QQ, "n1", ms(30), ms(45)),
    ]
    lag = faulty["replica_lag"]
    healthy = [r["lag"] for r in lag if not (ms(30) <= r["at_ms"] < ms(45))]
    behind = [r["lag"] for r in lag if ms(30) <= r["at_ms"] < ms(45) and r["follower"] == "n1"]
    # the leader's commit index is interpolated to the follower's record time: a few entries off at most
    # (a quorum group commits ~200 entries a window here), where n1 cut off falls thousands behind
    assert max(abs(x) for x in healthy) < 50 and max(behind) > 1000


# ------------------------------------------------------------------ metrics


def test_exactly_the_injected_losses(faulty):
    assert rows(faulty, "losses", "queue", "at_ms", "lost", "node", "confirmed_lost") == [
        ("cq1", ms(50), 7, "n3", True),
        ("qq1", ms(80), 3, "n3", True),  # a quorum queue: the leader's record (n3 leads in term 4)
    ]


def test_conservation_holds_everywhere_else(faulty):
    by_queue: dict[str, list] = {}
    for r in faulty["queue_windows"]:
        by_queue.setdefault(r["queue"], []).append(r)
    for name, expect in {
        "cq2": lambda w: 0,
        "cq1": lambda w: 0 if w < 50 or w >= 93 else 7,  # restarted at 93: a new counter epoch
        "qq1": lambda w: 0 if w < 80 else 3,
    }.items():
        got = sorted(by_queue[name], key=lambda r: r["at_ms"])
        assert [(r["at_ms"], r["missing"]) for r in got] == [(r["at_ms"], expect((r["at_ms"] - ms(0)) // 5000))
                                                              for r in got], name  # fmt: skip
        assert all(r["confirmed_gap"] <= 0 for r in got if r["missing"] == 0), name
    epochs = {r["epoch"] for r in by_queue["cq1"]}
    assert epochs == {0, 1}
    qq_nodes = {((r["at_ms"] - ms(0)) // 5000, r["node"]) for r in by_queue["qq1"]}
    assert (59, "n2") in qq_nodes and (60, "n3") in qq_nodes and (91, "n1") in qq_nodes  # the leader's record
    assert not any(ms(115) <= r["at_ms"] < ms(119) for r in by_queue["qq1"])  # nobody led: no record counts


def test_rates_are_per_second_and_survive_a_counter_reset(faulty):
    cq1 = sorted((r for r in faulty["queue_windows"] if r["queue"] == "cq1"), key=lambda r: r["at_ms"])
    assert cq1[0]["published_rate"] is None  # nothing to compare the first record with
    rates = [r["published_rate"] for r in cq1[1:] if not r["reset"]]
    assert all(40 / 5.4 <= r <= 120 / 4.6 for r in rates)  # 40-120 publishes per window, records 4.6-5.4 s apart
    after = next(r for r in cq1 if r["at_ms"] == ms(93))
    assert after["reset"] and after["published_rate"] > 0  # the counter restarted from 0: the new value is the delta


def test_counter_resets_and_restarts(faulty):
    assert rows(faulty, "restarts", "node", "at_ms") == [("n3", ms(93))]
    resets = rows(faulty, "counter_resets", "node", "queue", "at_ms")
    assert resets == [("n3", "cq1", ms(93))]


def test_consumers_that_stopped_while_the_queue_grew(faulty):
    assert rows(faulty, "consumer_stops", "queue", "start_ms", "end_ms") == [("cq2", ms(100), ms(111))]


def test_a_backlog_growing_with_consumers_attached(faulty):
    assert rows(faulty, "backlog_growth", "queue", "start_ms", "end_ms") == [("qq1", ms(100), ms(114))]


# ------------------------------------------------------------------ no false alarm

FINDINGS = ["partitions", "asymmetries", "split_brains", "leaderless", "leader_changes", "lag_growth", "losses",
            "counter_resets", "restarts", "consumer_stops", "backlog_growth"]  # fmt: skip


def test_a_healthy_fleet_raises_no_alarm(healthy):
    found = {name: healthy[name] for name in FINDINGS if healthy[name]}
    assert found == {}
    assert rows(healthy, "topology", "start_ms", "end_ms", "components", "silent") == [
        (ms(0), ms(120), [["n1", "n2", "n3", "n4"]], [])]  # n1's and n4's skipped records are carried over
    assert all(r["missing"] == 0 for r in healthy["queue_windows"])


def test_a_wall_clock_stepped_during_a_boot_moves_none_of_its_records(healthy):
    # n3's clock ran 7 minutes ahead in windows 70-84: read on its monotonic clock, its records
    # stay in the windows they were written in, and no rate is divided by the step
    qq1 = {r["at_ms"]: r for r in healthy["queue_windows"] if r["queue"] == "qq1"}
    assert [qq1[ms(w)]["node"] for w in range(66, 90)] == ["n3"] * 24 and max(qq1) < ms(120)
    rates = [qq1[ms(w)]["published_rate"] for w in range(66, 90)]
    assert all(40 / 5.4 <= r <= 120 / 4.6 for r in rates), rates


def test_of_two_records_in_one_window_the_later_counts(healthy):
    cq1 = {r["at_ms"]: r for r in healthy["queue_windows"] if r["queue"] == "cq1"}  # cq1 lives on n2
    assert cq1[ms(50)]["consumers"] == 2  # the earlier record of window 50 says 0 consumers and depth + 1000
