"""The versions job on generated snapshot sets (snapgen.py): the faulty set carries a
rolling upgrade (n3 comes back from its restart on 0.2.0 at window 93, n1 follows at
100, n2 at 105) and a flag new in 0.2.0 enabled at 110 (n2 sees it at 111); the
healthy set runs one version throughout."""

from __future__ import annotations

import pytest
from snapgen import ms

pytestmark = pytest.mark.slow


def rows(audited, name, *keys):
    return sorted(tuple(r[k] for k in keys) for r in audited[name])


def test_each_nodes_versions_in_order(faulty):
    assert rows(faulty, "versions", "node", "start_ms", "end_ms", "version", "previous", "boots") == [
        ("n1", ms(0), ms(100), "0.1.0", None, 1), ("n1", ms(100), ms(125), "0.2.0", "0.1.0", 1),
        ("n2", ms(0), ms(105), "0.1.0", None, 1), ("n2", ms(105), ms(125), "0.2.0", "0.1.0", 1),
        ("n3", ms(0), ms(90), "0.1.0", None, 1), ("n3", ms(93), ms(125), "0.2.0", "0.1.0", 1),
    ]  # fmt: skip


def test_the_mixed_version_window_counts_a_down_node_with_its_last_version(faulty):
    # n3 is down at 90-92: still 0.1.0 then, so the cluster is mixed only once it is back on 0.2.0
    assert rows(faulty, "mixed_versions", "start_ms", "end_ms", "versions") == [
        (ms(93), ms(105), ["0.1.0", "0.2.0"])]
    steps = rows(faulty, "version_mix", "start_ms", "end_ms", "n_versions", "mixed")
    assert steps == [(ms(0), ms(93), 1, False), (ms(93), ms(100), 2, True), (ms(100), ms(105), 2, True),
                     (ms(105), ms(125), 1, False)]  # fmt: skip
    step2 = next(r for r in faulty["version_mix"] if r["start_ms"] == ms(100))
    assert [(a["node"], a["version"]) for a in step2["assignment"]] == [("n1", "0.2.0"), ("n2", "0.1.0"),
                                                                        ("n3", "0.2.0")]  # fmt: skip


def test_flags_enabled_and_supported_to_the_window(faulty):
    got = {r["flag"]: r for r in faulty["flags"]}
    assert sorted(got) == ["quorum_queue", "stream_queue"]
    qq, sq = got["quorum_queue"], got["stream_queue"]
    assert (qq["enabled_ms"], qq["everywhere_ms"], qq["supported_ms"], qq["from_start"]) == (ms(0), ms(0), ms(0), True)
    # supported by every node once the last one runs 0.2.0; enabled after the mixed window
    assert (sq["supported_ms"], sq["enabled_ms"], sq["everywhere_ms"]) == (ms(105), ms(110), ms(111))
    assert sq["enabled_by"] == ["n1", "n3"] and sq["versions"] == ["0.2.0"] and sq["from_start"] is False


def test_one_version_throughout(healthy):
    assert rows(healthy, "versions", "node", "version") == [(n, "0.1.0") for n in ("n1", "n2", "n3", "n4")]
    assert healthy["mixed_versions"] == []
    assert [(r["n_versions"], r["mixed"]) for r in healthy["version_mix"]] == [(1, False)]
    assert rows(healthy, "flags", "flag", "enabled_ms", "from_start") == [("quorum_queue", ms(0), True)]
