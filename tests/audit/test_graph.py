"""audit/graph.py: components and asymmetries of one window (pure Python, what the UDF runs)."""

from __future__ import annotations

from audit.graph import components, signature, window_graph, window_row


def test_components_by_union_find():
    assert components(["c", "a", "b", "d"], [("a", "b"), ("c", "d"), ("b", "a")]) == [["a", "b"], ["c", "d"]]
    assert components(["a"], []) == [["a"]]
    assert components(["a", "b"], [("a", "zz")]) == [["a"], ["b"]]  # an edge to an unknown node is ignored
    chain = [(str(i), str(i + 1)) for i in range(100)]
    assert components([str(i) for i in range(101)], chain) == [sorted(str(i) for i in range(101))]


def test_an_edge_needs_both_sides():
    comps, asym = window_graph([("a", ["b", "c"]), ("b", ["a"]), ("c", [])])
    assert comps == [["a", "b"], ["c"]] and asym == [("a", "c")]
    comps, asym = window_graph([("a", ["b", "x"]), ("b", ["a"])])  # x did not report: no asymmetry
    assert comps == [["a", "b"]] and asym == []


def test_a_carried_node_counts_only_if_someone_reaches_it():
    first = {"a": 0, "b": 0, "c": 0}
    # c wrote nothing this window (carried), a and b still reach it: timer drift, all connected
    comps, asym, silent, present = window_row(5, [("a", ["b", "c"], False), ("b", ["a", "c"], False),
                                                  ("c", ["a"], True)], first)  # fmt: skip
    assert comps == [["a", "b", "c"]] and asym == [] and silent == [] and present == ["a", "b", "c"]
    # c crashed: nobody reaches it, its stale record says it reaches a and b: silent, no partition
    comps, asym, silent, present = window_row(5, [("a", ["b"], False), ("b", ["a"], False),
                                                  ("c", ["a", "b"], True)], first)  # fmt: skip
    assert comps == [["a", "b"]] and asym == [] and silent == ["c"] and present == ["a", "b"]
    # every node carried (nobody wrote in this window): the old reports stand
    comps, _, silent, _ = window_row(5, [("a", ["b"], True), ("b", ["a"], True)], first)
    assert comps == [["a", "b"]] and silent == ["c"]
    # a node not seen yet is not silent
    assert window_row(5, [("a", [], False)], {"a": 0, "late": 9})[2] == []


def test_signature_tells_topologies_apart():
    assert signature([["a", "b"], ["c"]], []) != signature([["a"], ["b", "c"]], [])
    assert signature([["a", "b"]], ["c"]) != signature([["a", "b"]], [])
