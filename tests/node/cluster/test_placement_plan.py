"""node/cluster/placement.py's pure parts: which locator applies, which node a new queue's
leader goes to, and which leaderships a rebalance moves."""

from __future__ import annotations

import random
from collections import Counter
from types import SimpleNamespace

import pytest

from node.cluster.placement import Move, Placement, choose_leader, locator_of, plan_moves
from node.vhosts.streams import DEFAULT_CLUSTER_SIZE, cluster_size
from queues.stream.config import StreamConfig
from routing.errors import InvalidArgument


def test_the_queue_argument_wins_over_the_policy_and_the_policy_over_the_setting():
    assert locator_of({"x-queue-leader-locator": "balanced"}, {"queue-leader-locator": "client-local"},
                      "client-local") == "balanced"  # fmt: skip
    assert locator_of({}, {"queue-leader-locator": "balanced"}, "client-local") == "balanced"
    assert locator_of({}, None, "balanced") == "balanced"
    assert locator_of({}, {"max-length": 3}, "client-local") == "client-local"


@pytest.mark.parametrize("value", ["random", "least-leaders", "", 3])
def test_an_unknown_locator_is_refused(value):
    with pytest.raises(InvalidArgument, match="x-queue-leader-locator"):
        locator_of({"x-queue-leader-locator": value}, None, "client-local")


def test_client_local_is_the_declaring_node_unless_it_is_in_maintenance():
    members = ["a", "b", "c"]
    assert choose_leader("client-local", "a", members, {"a": 9}) == "a"
    assert choose_leader("client-local", "a", members, {"a": 9, "b": 1, "c": 0}, excluded={"a"}) == "c"


def test_balanced_is_the_member_leading_fewest_and_never_one_in_maintenance():
    members = ["a", "b", "c"]
    assert choose_leader("balanced", "a", members, {"a": 3, "b": 1, "c": 2}) == "b"
    assert choose_leader("balanced", "a", members, {"a": 3, "b": 1, "c": 2}, excluded={"b"}) == "c"
    picks = Counter(choose_leader("balanced", "a", members, {"a": 2}, rng=random.Random(i)) for i in range(60))
    assert set(picks) == {"b", "c"}  # a tie is broken at random
    assert choose_leader("balanced", "a", ["a"], {}, excluded={"a"}) == "a"  # nobody else to lead


def test_balanced_placement_of_many_queues_spreads_them_evenly():
    leading: Counter = Counter()
    for _ in range(30):
        leading[choose_leader("balanced", "a", ["a", "b", "c"], leading)] += 1
    assert leading == {"a": 10, "b": 10, "c": 10}


def three(groups: int, leader: str) -> tuple[dict, dict]:
    return {f"g{i}": leader for i in range(groups)}, {f"g{i}": ("a", "b", "c") for i in range(groups)}


def apply(leaders: dict, moves: list[Move]) -> Counter:
    after = dict(leaders)
    for m in moves:
        assert after[m.group] == m.source
        after[m.group] = m.target
    return Counter(after.values())


def test_a_rebalance_evens_out_the_leaders():
    leaders, members = three(9, "a")
    moves = plan_moves(leaders, members)
    assert apply(leaders, moves) == {"a": 3, "b": 3, "c": 3} and len(moves) == 6
    assert len({m.group for m in moves}) == len(moves)  # each group moves once


def test_a_balanced_cluster_needs_no_move():
    leaders = {"g0": "a", "g1": "b", "g2": "c", "g3": "a"}
    assert plan_moves(leaders, {g: ("a", "b", "c") for g in leaders}) == []


def test_no_leadership_goes_to_an_excluded_node_or_to_a_node_without_a_replica():
    leaders, members = three(6, "a")
    moves = plan_moves(leaders, members, excluded={"c"})
    assert apply(leaders, moves) == {"a": 3, "b": 3}
    members = {"g0": ("a", "b"), "g1": ("a", "b"), "g2": ("a", "b"), "g3": ("a", "b")}
    moves = plan_moves({g: "a" for g in members}, members)
    assert all(m.target == "b" for m in moves) and apply({g: "a" for g in members}, moves) == {"a": 2, "b": 2}


def test_a_streams_policy_places_a_new_streams_leader():
    """The policy is chosen for the queue's own type: apply-to streams covers a stream, not a quorum queue."""
    policy = SimpleNamespace(name="p", pattern="^s", apply_to="streams", priority=0,
                             definition={"queue-leader-locator": "balanced"})  # fmt: skip
    node = SimpleNamespace(node_id="a", projections=SimpleNamespace(vhost_policies=lambda vhost: [policy]),
                           metadata=SimpleNamespace(state=SimpleNamespace(members={"a", "b"})))  # fmt: skip
    placement = Placement(node, "client-local")
    placement.leading_counts = lambda: {"a": 5, "b": 0}
    placement.nodes_in_maintenance = lambda: set()
    assert placement.leader_for("/", "s1", {}, "stream") == "b"  # balanced: the member leading fewest
    assert placement.leader_for("/", "s1", {}, "quorum") == "a"  # the policy is not for quorum queues


def test_a_streams_policy_sets_a_new_streams_replica_count_over_its_argument():
    policy = SimpleNamespace(name="p", pattern="^s", apply_to="streams", priority=0,
                             definition={"initial-cluster-size": 5})  # fmt: skip
    node = SimpleNamespace(projections=SimpleNamespace(vhost_policies=lambda vhost: [policy]))
    placement = Placement(node, "client-local")
    assert placement.policy_definition("/", "q", "stream") == {}  # the pattern does not match
    definition = placement.policy_definition("/", "s1", "stream")
    assert cluster_size(StreamConfig.from_arguments({"x-initial-cluster-size": 2}), definition) == 5
    assert cluster_size(StreamConfig.from_arguments({"x-initial-cluster-size": 2}), {}) == 2
    assert cluster_size(StreamConfig(), {}) == DEFAULT_CLUSTER_SIZE
