"""The nemesis generator (chaos_nemesis.schedule) without docker: a seed reproduces its
schedule, every fault is healed before the quiet end, the kinds mix, and bad input is refused."""

from __future__ import annotations

import pytest
from chaos_nemesis import CLOCK_KINDS, DEFAULT_KINDS, JUMPS, KINDS, QUIET, RATES, schedule

NODES3 = ["warren1", "warren2", "warren3"]
NODES5 = [f"warren{i}" for i in range(1, 6)]


def test_same_seed_same_schedule():
    assert schedule(42, 180, NODES3) == schedule(42, 180, NODES3)
    assert schedule(42, 180, NODES3) == schedule(42, 180, list(reversed(NODES3)))  # order of nodes irrelevant


def test_different_seeds_differ():
    assert schedule(1, 180, NODES3) != schedule(2, 180, NODES3)


@pytest.mark.parametrize("duration", [30, 60, 180, 600])
def test_faults_one_at_a_time_and_healed_before_the_quiet_end(duration):
    steps = schedule(7, duration, NODES5)
    assert steps
    for a, b in zip(steps, steps[1:], strict=False):
        assert a.at + a.hold < b.at  # one fault at a time
    assert steps[-1].at + steps[-1].hold <= duration - QUIET


def test_a_long_run_mixes_every_kind():
    kinds = {s.kind for seed in range(5) for s in schedule(seed, 180, NODES3, kinds=KINDS)}
    assert kinds == set(KINDS)
    assert {s.kind for seed in range(5) for s in schedule(seed, 180, NODES3)} == set(DEFAULT_KINDS)


def test_targets_are_cluster_nodes_and_splits_cover_them():
    for seed in range(20):
        for s in schedule(seed, 180, NODES5):
            p = s.params
            if "node" in p:
                assert p["node"] in NODES5
            if s.kind == "partition-majority":
                assert sorted(p["minority"] + p["majority"]) == NODES5
                assert len(p["minority"]) < len(p["majority"])
            if s.kind == "partition-bridge":
                assert sorted([p["bridge"], *p["left"], *p["right"]]) == NODES5
                assert p["left"] and p["right"]
            if s.kind == "slow-link":
                assert p["rate_kbit"] > 0 and 0 <= p["loss_pct"] <= 10
            if s.kind == "clock-jump":
                assert abs(p["seconds"]) in JUMPS
            if s.kind == "clock-drift":
                assert p["rate"] in RATES and p["rate"] != 1
            if s.kind == "disk-full":
                assert p["op"] in ("write", "fsync")


def test_clock_faults_go_both_ways():
    jumps = [s.params["seconds"] for seed in range(10) for s in schedule(seed, 180, NODES3, kinds=("clock-jump",))]
    rates = [s.params["rate"] for seed in range(10) for s in schedule(seed, 180, NODES3, kinds=("clock-drift",))]
    assert min(jumps) < 0 < max(jumps) and min(rates) < 1 < max(rates)
    # drawn when asked for (they need a cluster under libfaketime), not by default
    assert CLOCK_KINDS <= set(KINDS) and not CLOCK_KINDS & set(DEFAULT_KINDS)


def test_kinds_restrict_the_schedule():
    assert {s.kind for s in schedule(3, 180, NODES3, kinds=("kill9",))} == {"kill9"}


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="unknown fault kinds"):
        schedule(1, 60, NODES3, kinds=("meteor",))
    with pytest.raises(ValueError, match="at least 3 nodes"):
        schedule(1, 60, NODES3[:2])
    with pytest.raises(ValueError, match="no fault kinds"):
        schedule(1, 60, NODES3, kinds=())


def test_a_run_too_short_for_a_fault_has_none():
    assert schedule(1, QUIET + 2, NODES3) == []
