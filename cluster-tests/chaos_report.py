"""What a chaos scenario found: its checks (pass, fail or skip, with details), its timings, the
checkers' results, and the text and table a reader sees.

    report = Report("kill9-leader", history)
    report.check("the survivors elect a new leader", new in survivors, detail)
    report.time("new leader elected", seconds)
    report.check_queue(); report.check_metadata(read)
    print(report.text()); print(results_table([report]))

A check that cannot apply is `skip` (with the reason), not `fail`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from chaos_checker import MetadataCheck, QueueCheck, check_metadata, check_total_queue, fault_timeline
from chaos_history import History

PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclass
class Check:
    name: str
    status: str  # pass | fail | skip
    detail: str = ""


@dataclass
class Report:
    scenario: str
    history: History
    setup: str = ""  # e.g. "queue type quorum, cross-node True"
    checks: list[Check] = field(default_factory=list)
    queue: QueueCheck | None = None
    metadata: MetadataCheck | None = None
    timings: dict[str, float] = field(default_factory=dict)  # what -> seconds
    started: float = field(default_factory=time.monotonic)
    duration: float = 0.0

    def check(self, name: str, passed: bool, detail: str = "") -> bool:
        self.checks.append(Check(name, PASS if passed else FAIL, detail))
        return passed

    def skip(self, name: str, reason: str) -> None:
        self.checks.append(Check(name, SKIP, reason))

    def time(self, what: str, seconds: float) -> None:
        self.timings[what] = round(seconds, 2)

    def check_queue(self, allow_unmarked_duplicates: bool = False) -> QueueCheck:
        self.queue = check_total_queue(self.history.ops(), allow_unmarked_duplicates)
        self.check("total-queue", self.queue.valid, "; ".join(self.queue.problems()))
        return self.queue

    def check_metadata(self, read: Callable[[], dict], timeout: float = 15.0) -> MetadataCheck:
        """`read()` every node (node -> its objects, None when it did not answer) until each
        shows every acknowledged change, or the nodes agree with each other twice in a row, or
        `timeout` passes (a follower applies a committed change a moment after the leader);
        then check."""
        started, previous = time.monotonic(), None
        while True:
            views = read()
            self.metadata = check_metadata(self.history.ops(), views)
            agreed = None not in views.values() and len({frozenset(v) for v in views.values()}) == 1
            if self.metadata.valid or (agreed and views == previous) or time.monotonic() - started > timeout:
                break
            previous = views if agreed else None
            time.sleep(0.25)
        self.time("metadata visible on every node", time.monotonic() - started)
        self.check("metadata: every acknowledged change on every node", self.metadata.valid,
                   "; ".join(self.metadata.problems()))  # fmt: skip
        return self.metadata

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL]

    @property
    def skipped(self) -> list[Check]:
        return [c for c in self.checks if c.status == SKIP]

    @property
    def ok(self) -> bool:
        return not self.failed

    def text(self) -> str:
        setup = f" ({self.setup})" if self.setup else ""
        lines = [f"=== scenario {self.scenario}: {'ok' if self.ok else 'FAILED'} in {self.duration:.1f}s{setup}"]
        for c in self.checks:
            lines.append(f"  [{c.status}] {c.name}" + (f": {c.detail}" if c.detail else ""))
        if self.timings:
            lines.append("  timings: " + ", ".join(f"{k} {v:.2f}s" for k, v in self.timings.items()))
        faults = fault_timeline(self.history.ops())
        if faults:
            lines.append("  faults:\n" + faults)
        for part in (self.queue, self.metadata):
            if part is not None:
                lines.append("  " + part.summary().replace("\n", "\n  "))
        return "\n".join(lines)

    def assert_ok(self) -> None:
        assert self.ok, self.text()


def results_table(reports: list[Report], up: dict[str, float] | None = None) -> str:
    """The reports as the markdown table of docs/chaos.md (`up`: compose up time per scenario)."""
    lines = ["| scenario | result | run | published | confirmed | consumed | lost | duplicated | "
             "longest unavailability | metadata ok/fail/unknown | metadata violations | converged after faults |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in reports:
        result = "ok" if r.ok else "FAILED"
        if r.ok and r.skipped:
            result += f" ({len(r.skipped)} skipped)"
        run = f"{r.duration:.1f}s" + (f" (+{up[r.scenario]:.1f}s up)" if up and r.scenario in up else "")
        q = r.queue.as_row() if r.queue else {}
        m = r.metadata
        md = f"{m.ok}/{m.failed}/{m.unknown}" if m else ""
        converged = r.timings.get("converged after the faults")
        lines.append(f"| {r.scenario} | {result} | {run} | {q.get('published', '')} | {q.get('confirmed', '')} | "
                     f"{q.get('consumed', '')} | {q.get('lost', '')} | {q.get('duplicated', '')} | "
                     f"{q.get('unavailability_s', '')}s | {md} | {m.violations if m else ''} | "
                     f"{'' if converged is None else f'{converged:.1f}s'} |")  # fmt: skip
    return "\n".join(lines)
