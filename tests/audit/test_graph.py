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
    comps, asym, silent, present, _ = window_row(5, [("a", ["b", "c"], False), ("b", ["a", "c"], False),
                                                     ("c", ["a"], True)], first)  # fmt: skip
    assert comps == [["a", "b", "c"]] and asym == [] and silent == [] and present == ["a", "b", "c"]
    # c crashed: nobody reaches it, its stale record says it reaches a and b: silent, no partition
    comps, asym, silent, present, _ = window_row(5, [("a", ["b"], False), ("b", ["a"], False),
                                                     ("c", ["a", "b"], True)], first)  # fmt: skip
    assert comps == [["a", "b"]] and asym == [] and silent == ["c"] and present == ["a", "b"]
    # every node carried (nobody wrote in this window): the old reports stand
    comps, _, silent, _, _ = window_row(5, [("a", ["b"], True), ("b", ["a"], True)], first)
    assert comps == [["a", "b"]] and silent == ["c"]
    # a node not seen yet is not silent
    assert window_row(5, [("a", [], False)], {"a": 0, "late": 9})[2] == []


def test_a_bridge_partition_is_one_component_with_a_cut_pair():
    first = dict.fromkeys("abcde", 0)
    # a and b cut off from each other, c (the bridge) reaching both: one component
    comps, asym, _, _, cut = window_row(5, [("a", ["c"], False), ("b", ["c"], False), ("c", ["a", "b"], False)], first)
    assert comps == [["a", "b", "c"]] and asym == [] and cut == [["a", "b"]]
    # five nodes, {a, b} | e | {c, d}: every pair across the cut, none within a side or with e
    reports = [("a", ["b", "e"], False), ("b", ["a", "e"], False), ("c", ["d", "e"], False),
               ("d", ["c", "e"], False), ("e", ["a", "b", "c", "d"], False)]  # fmt: skip
    assert window_row(5, reports, first)[4] == [["a", "c"], ["a", "d"], ["b", "c"], ["b", "d"]]
    # a plain partition is components, not cut pairs; a one-way report is an asymmetry, not a cut
    assert window_row(5, [("a", [], False), ("b", ["c"], False), ("c", ["b"], False)], first)[4] == []
    assert window_row(5, [("a", ["b"], False), ("b", [], False)], first)[4] == []
    # a carried record takes no part
    assert window_row(5, [("a", ["c"], False), ("b", ["c"], True), ("c", ["a", "b"], False)], first)[4] == []


def test_signature_tells_topologies_apart():
    assert signature([["a", "b"], ["c"]], []) != signature([["a"], ["b", "c"]], [])
    assert signature([["a", "b"]], ["c"]) != signature([["a", "b"]], [])
