"""The HTML report (render: pure Python, fast) and `warren audit` end to end (Spark, slow)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest
from snapgen import QQ, ms

from audit import report, svg


def _data(**over) -> dict:
    t = {name: [] for name in report.TABLES}
    t["partitions"] = [{"start_ms": ms(30), "end_ms": ms(45), "windows": 15, "components": [["n1"], ["n2", "n3"]],
                        "silent": []}]  # fmt: skip
    t["split_brains"] = [{"group": QQ, "term": 3, "leaders": ["n1", "n3"], "first_ms": ms(70), "last_ms": ms(74),
                          "overlap_start_ms": ms(70), "overlap_end_ms": ms(75)}]  # fmt: skip
    t["losses"] = [{"vhost": "/", "queue": "cq1", "type": "classic", "node": "n3", "at_ms": ms(50), "lost": 7,
                    "missing": 7, "confirmed_gap": 5, "confirmed_lost": True}]  # fmt: skip
    t["restarts"] = [{"node": "n3", "at_ms": ms(93), "silent_ms": 20000, "from_boot": "a", "to_boot": "b"}]
    t["leaderless"] = [{"group": "metadata", "start_ms": ms(30), "end_ms": ms(32), "duration_ms": 10000}]
    t["versions"] = [{"node": n, "version": v, "previous": p, "start_ms": ms(s), "end_ms": ms(e), "windows": e - s,
                      "boots": 1} for n, v, p, s, e in (("n1", "0.1.0", None, 0, 100), ("n1", "0.2.0", "0.1.0", 100, 120),
                                                        ("n2", "0.2.0", None, 0, 120), ("n3", "0.1.0", None, 0, 90),
                                                        ("n3", "0.2.0", "0.1.0", 93, 120))]
    t["mixed_versions"] = [{"start_ms": ms(0), "end_ms": ms(100), "windows": 100, "versions": ["0.1.0", "0.2.0"]}]
    t["flags"] = [{"flag": "quorum_queue", "supported_ms": ms(0), "enabled_ms": ms(0), "enabled_by": ["n1", "n2", "n3"],
                   "everywhere_ms": ms(0), "versions": ["0.1.0", "0.2.0"], "from_start": True},
                  {"flag": "stream_queue", "supported_ms": ms(100), "enabled_ms": ms(104), "enabled_by": ["n2"],
                   "everywhere_ms": ms(105), "versions": ["0.2.0"], "from_start": False}]
    data = {
        "generated_ms": ms(200), "source": "/snapshots <&>", "period_ms": 5000, "t0": ms(0), "t1": ms(120),
        "nodes": ["n1", "n2", "n3"], "windows": 120, "lines": 360, "bad_lines": 1, "newer_records": 0,
        "tables": t, "counts": {name: len(rows) for name, rows in t.items()}, "lost_total": 7, "bucket_ms": 5000,
        "topology": [
            {"start_ms": ms(0), "end_ms": ms(30), "n_components": 1, "components": [["n1", "n2", "n3"]], "silent": []},
            {"start_ms": ms(30), "end_ms": ms(45), "n_components": 2, "components": [["n1"], ["n2", "n3"]],
             "silent": []},
            {"start_ms": ms(90), "end_ms": ms(93), "n_components": 1, "components": [["n1", "n2"]], "silent": ["n3"]},
        ],
        "groups": ["metadata", QQ], "groups_total": 5,
        "leaders": [
            {"group": "metadata", "leader": "n1", "start_ms": ms(0), "end_ms": ms(30), "term_first": 1, "term_last": 1},
            {"group": "metadata", "leader": None, "start_ms": ms(30), "end_ms": ms(32), "term_first": None,
             "term_last": None},
            {"group": QQ, "leader": "n3", "start_ms": ms(60), "end_ms": ms(90), "term_first": 2, "term_last": 4},
        ],
        "lag": [{"group": QQ, "points": [(ms(w), w * 10) for w in range(30, 45)]}],
        "queues": [{"vhost": "/", "queue": "cq1", "type": "classic",
                    "points": [{"t": ms(w), "depth": 200 + w, "unacked": 3, "consumers": 2, "published_rate": 16.0,
                                "delivered_rate": None if w == 10 else 15.5, "acknowledged_rate": 15.0}
                               for w in range(120) if not 90 <= w < 93]}],
        "queues_total": 3,
    }  # fmt: skip
    data.update(over)
    return data


class _Checker(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for k, v in attrs:
            if k in ("src", "href") and v and not v.startswith("#"):
                self.external.append(v)


def test_render_is_one_self_contained_page():
    html = report.render(_data())
    p = _Checker()
    p.feed(html)
    assert p.external == [] and "script" not in p.tags  # nothing to fetch, nothing to run
    assert p.tags.count("svg") == 6  # partitions, leaders, versions, replica lag, the queue's rates and depth
    assert "/snapshots &lt;&amp;&gt;" in html  # data is escaped
    assert "1 unreadable lines" in html
    for title in ("Partitions", "Split brains", "Messages lost", "Without a leader", "Leader changes"):
        assert title in html
    assert "SPLIT BRAIN term 3: n1, n3" in html
    assert "lost 7" in html  # the loss marker on the queue's charts
    assert "2 of 5 groups shown" in html and "1 of 3 queues shown" in html
    assert re.search(r'class="card bad">Partitions<b>1</b>', html)
    # versions: one lane segment per run, the mixed window shaded, the flag enabled during the data marked
    assert "n3: 0.2.0 (" in html and "mixed: 0.1.0, 0.2.0" in html
    assert "feature flag stream_queue enabled (seen first on n2)" in html
    assert "feature flag quorum_queue enabled" not in html  # on from the start: no marker
    assert re.search(r'class="card warn">Versions<b>2</b><span class="meta">mixed for 8.3 min', html)


def test_render_a_healthy_fleet():
    data = _data()
    data["tables"] = {name: [] for name in report.TABLES}
    data["counts"] = dict.fromkeys(report.TABLES, 0)
    data["lost_total"] = 0
    html = report.render(data)
    assert 'class="card bad"' not in html and 'class="card warn"' not in html
    assert html.count("None.") == len(report.TABLES)
    assert "No version in the snapshots." in html


def test_render_without_the_versions_job():
    """A caller that ran only the partitions and metrics jobs (docs/audit.md, "From Python")."""
    data = _data()
    for name in report.VERSION_TABLES:
        del data["tables"][name], data["counts"][name]
    html = report.render(data)
    assert "Versions and feature flags" not in html and "Mixed-version windows" not in html


def test_render_draws_outside_events_on_the_partitions_timeline():
    events = [{"start_ms": ms(30), "end_ms": ms(45), "label": "partition n1 <cut>"},
              {"start_ms": ms(93), "end_ms": ms(93), "label": "kill9 n3"}]  # fmt: skip
    html = report.render(_data(events=events))
    assert "partition n1 &lt;cut&gt; (" in html and "kill9 n3 (" in html  # escaped, with their times
    assert 'lane "events"' in html and html.count("<svg") == 6  # a lane of the partitions timeline, not a chart
    assert 'lane "events"' not in report.render(_data())


def test_read_events_names_the_line_that_is_not_one(tmp_path):
    good = tmp_path / "events.ndjson"
    good.write_text('{"start_ms": 2000, "end_ms": 3000, "label": "b"}\n\n{"start_ms": 1000, "end_ms": 1000, '
                    '"label": "a", "node": "n1"}\n')  # fmt: skip
    assert report.read_events(str(good)) == [{"start_ms": 1000, "end_ms": 1000, "label": "a"},
                                             {"start_ms": 2000, "end_ms": 3000, "label": "b"}]  # fmt: skip
    for bad in ('{"start_ms": 2, "end_ms": 1, "label": "x"}', '{"start_ms": 1, "label": "x"}', "[1, 2]", "nope",
                '{"start_ms": 1.5, "end_ms": 2, "label": "x"}'):
        (tmp_path / "bad.ndjson").write_text('{"start_ms": 1, "end_ms": 1, "label": "ok"}\n' + bad + "\n")
        with pytest.raises(ValueError, match=r"bad.ndjson:2: not an event"):
            report.read_events(str(tmp_path / "bad.ndjson"))


def test_svg_helpers():
    ticks, step = svg.time_ticks(ms(0), ms(120))
    assert step == 120_000 and len(ticks) == 5 and all(ms(0) <= t <= ms(120) for t in ticks)
    assert svg.nice_max(0) == (1.0, 0.25) and svg.nice_max(87) == (100, 25)
    assert svg.fmt_num(1234) == "1.23k" and svg.fmt_num(12.5) == "12.5" and svg.fmt_num(None) == "–"
    assert svg._runs([(0, 1), (1, None), (2, 3), (3, 4), (100, 5)], gap_ms=10) == [[(0, 1.0)], [(2, 3.0), (3, 4.0)],
                                                                                  [(100, 5.0)]]  # fmt: skip


# ------------------------------------------------------------------ warren audit, end to end


@pytest.mark.slow
def test_warren_audit_report_end_to_end(spark, faulty, tmp_path, capsys):
    from node.cli import main

    out = tmp_path / "out"
    events = tmp_path / "events.ndjson"
    events.write_text(json.dumps({"start_ms": ms(30), "end_ms": ms(45), "label": "partition n1"}) + "\n")
    argv = ["audit", "report", "--snapshots", str(faulty.root), "--out", str(out), "--master", "local[2]",
            "--json", str(tmp_path / "report.json"), "--events", str(events)]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert str(out / "report.html") in printed
    assert "mixed_versions: 1" in printed and "stream_queue: enabled 2023-11-14 22:22:30 on 0.2.0" in printed
    got = json.loads((tmp_path / "report.json").read_text())
    assert got["events"] == [{"start_ms": ms(30), "end_ms": ms(45), "label": "partition n1"}]
    assert got["counts"]["losses"] == 2 and [r["versions"] for r in got["tables"]["mixed_versions"]] == [
        ["0.1.0", "0.2.0"]]
    assert "partitions: 2" in printed and "split_brains: 1" in printed and "losses: 2" in printed
    assert "/ cq1: 7 lost (confirmed ones)" in printed
    html = (out / "report.html").read_text()
    assert html.startswith("<!doctype html>") and "<svg" in html and "SPLIT BRAIN term 3: n1, n3" in html
    losses = spark.read.parquet(str(out / "metrics" / "losses")).collect()
    assert sorted((r["queue"], r["lost"]) for r in losses) == [("cq1", 7), ("qq1", 3)]
    parts = spark.read.parquet(str(out / "partitions" / "partitions")).collect()
    assert sorted(r["start_ms"] for r in parts) == [ms(30), ms(115)]
    mixed = spark.read.parquet(str(out / "versions" / "mixed_versions")).collect()
    assert [(r["start_ms"], r["end_ms"]) for r in mixed] == [(ms(93), ms(105))]
    assert spark.sparkContext._jsc is not None  # the test's session still runs


@pytest.mark.slow
def test_warren_audit_says_why_it_cannot_read(spark, tmp_path, capsys):
    from node.cli import main

    assert main(["audit", "partitions", "--snapshots", str(tmp_path / "nowhere")]) == 1
    assert "no such file or directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "snapshots-1.ndjson").write_text("not json\n")
    assert main(["audit", "metrics", "--snapshots", str(tmp_path / "empty")]) == 1
    assert "no readable snapshot records" in capsys.readouterr().err
    (tmp_path / "events.ndjson").write_text("not an event\n")
    argv = ["audit", "report", "--snapshots", str(tmp_path / "empty"), "--events", str(tmp_path / "events.ndjson")]
    assert main(argv) == 1
    assert "--events: " in capsys.readouterr().err
