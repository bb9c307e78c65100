"""Chaos scenarios: each one a function of a running ComposeCluster that runs a workload,
injects its faults on a schedule, and checks what must hold; it returns a Report.

    report = run_scenario("kill9-restart", cluster)
    print(report.text()); report.assert_ok()

Run them outside pytest (a fresh cluster each, a results table at the end):

    .venv/bin/python cluster-tests/chaos_scenarios.py [--source worktree|head] [NAME ...]

QUEUE_TYPE is the type of the workload's queue: "quorum" (the default; publishers on every
node, consumers on the nodes other than the declaring one), or "classic" with
WARREN_CHAOS_QUEUE_TYPE=classic (a classic queue lives on one node: clients talk to that node
unless WARREN_CHAOS_CROSS_NODE=1 sends them through the others).

A check that cannot apply yet is `skip` (with the reason), not `fail`: the metadata
convergence checks skip while topology changes made on one node do not reach the others
(before the metadata store carries topology).
"""

from __future__ import annotations

import os
import sys
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from chaos_checker import QueueCheck, check_total_queue, fault_timeline
from chaos_cluster import ComposeCluster, HttpError
from chaos_history import History
from chaos_workload import QueueWorkload, declare_queue

QUEUE_TYPE = os.environ.get("WARREN_CHAOS_QUEUE_TYPE", "quorum")
CROSS_NODE = os.environ.get("WARREN_CHAOS_CROSS_NODE", "1" if QUEUE_TYPE == "quorum" else "0") == "1"
RATE = float(os.environ.get("WARREN_CHAOS_RATE", "40"))  # messages/s per publisher
PASS, FAIL, SKIP = "pass", "fail", "skip"


# ---------------------------------------------------------------- reports


@dataclass
class Check:
    name: str
    status: str  # pass | fail | skip
    detail: str = ""


@dataclass
class Report:
    scenario: str
    history: History
    checks: list[Check] = field(default_factory=list)
    queue: QueueCheck | None = None
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
        lines = [f"=== scenario {self.scenario}: {'ok' if self.ok else 'FAILED'} in {self.duration:.1f}s "
                 f"(queue type {QUEUE_TYPE}, cross-node {CROSS_NODE})"]  # fmt: skip
        for c in self.checks:
            lines.append(f"  [{c.status}] {c.name}" + (f": {c.detail}" if c.detail else ""))
        if self.timings:
            lines.append("  timings: " + ", ".join(f"{k} {v:.2f}s" for k, v in self.timings.items()))
        faults = fault_timeline(self.history.ops())
        if faults:
            lines.append("  faults:\n" + faults)
        if self.queue is not None:
            lines.append("  " + self.queue.summary().replace("\n", "\n  "))
        return "\n".join(lines)

    def assert_ok(self) -> None:
        assert self.ok, self.text()


SCENARIOS: dict[str, Callable[[ComposeCluster, Report], None]] = {}


def scenario(name: str):
    """Register a scenario: a function (cluster, report) that fills the report."""

    def register(fn):
        SCENARIOS[name] = fn
        fn.scenario_name = name
        return fn

    return register


def run_scenario(name: str, cluster: ComposeCluster) -> Report:
    report = Report(name, cluster.history)
    try:
        SCENARIOS[name](cluster, report)
    except Exception as e:  # the report says where it stopped
        report.check("ran to the end", False, f"{type(e).__name__}: {str(e)[:3000]}")
    report.duration = time.monotonic() - report.started
    print("\n" + report.text(), flush=True)
    return report


# ---------------------------------------------------------------- helpers


def clients(cluster: ComposeCluster, queue_node: str) -> tuple[list[str], list[str]]:
    """(publish nodes, consume nodes): the queue's node alone until CROSS_NODE, else publishers
    on every node and consumers on the nodes other than the queue's."""
    if not CROSS_NODE:
        return [queue_node], [queue_node]
    others = [n for n in cluster.nodes if n != queue_node]
    return list(cluster.nodes), others


def declare(cluster: ComposeCluster, node: str, queue: str) -> None:
    """Declare a durable queue of QUEUE_TYPE through `node` (enabling quorum queues first)."""
    if QUEUE_TYPE == "quorum":  # the feature flag starts disabled on a fresh cluster
        cluster.http(node, "PUT", "/api/feature_flags/quorum_queue_v1/enable", {}, timeout=15)
    declare_queue(cluster, node, queue, QUEUE_TYPE)


def start_workload(cluster: ComposeCluster, report: Report, queue: str, queue_node: str, publishers: int = 1,
                   rate: float = RATE) -> QueueWorkload:  # fmt: skip
    declare(cluster, queue_node, queue)
    pub, con = clients(cluster, queue_node)
    pub = (pub * publishers)[: max(publishers, len(pub))]
    w = QueueWorkload(cluster, report.history, queue, queue_node, pub, con, rate=rate)
    w.start()
    return w


def finish_workload(w: QueueWorkload, report: Report, drain_timeout: float = 60.0) -> QueueCheck:
    drained = w.finish(drain_timeout=drain_timeout)
    report.check("queue drained after the faults", drained, "" if drained else f"depth {w.queue_depth()}; "
                 + "; ".join(f"{n}: {q_details(w.cluster, n, w.queue)}" for n in w.cluster.nodes))
    report.check("workload clients ran without harness errors", not w.errors, "; ".join(w.errors))
    q = report.check_queue()
    report.check("messages flowed", q.confirmed > 0 and q.consumed > 0, f"confirmed {q.confirmed}")
    return q


def q_details(cluster: ComposeCluster, node: str, queue: str) -> object:
    try:
        q = cluster.http(node, "GET", f"/api/queues/%2F/{queue}", timeout=5)
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return {k: q.get(k) for k in ("leader", "messages_ready", "messages_unacknowledged", "consumer_details")}


def exchanges(cluster: ComposeCluster, node: str) -> set[str]:
    return {x["name"] for x in cluster.http(node, "GET", "/api/exchanges/%2F", timeout=10)}


def declare_exchange(cluster: ComposeCluster, node: str, name: str, timeout: float = 15.0) -> tuple[int, object]:
    """(HTTP status, body) of declaring a durable direct exchange through `node`."""
    try:
        body = cluster.http(node, "PUT", f"/api/exchanges/%2F/{urllib.parse.quote(name, safe='')}",
                            {"type": "direct", "durable": True}, timeout=timeout)  # fmt: skip
        return 201, body
    except HttpError as e:
        return e.status, e.body
    except OSError as e:
        return 0, f"{type(e).__name__}: {e}"


def topology_replicated(cluster: ComposeCluster, probe: str, timeout: float = 5.0) -> bool:
    """Does an exchange declared on one node show up on every node? (Not before topology goes
    through the metadata store.)"""
    status, body = declare_exchange(cluster, cluster.nodes[0], probe)
    if status >= 300:
        raise AssertionError(f"declaring probe exchange {probe}: HTTP {status} {body}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(probe in exchanges(cluster, n) for n in cluster.nodes[1:]):
            return True
        time.sleep(0.25)
    return False


def term(cluster: ComposeCluster, node: str) -> int | None:
    s = cluster.status(node)
    return None if s is None else s["term"]


def poll(predicate: Callable[[], object], timeout: float, interval: float = 0.2) -> object:
    """The predicate's first truthy value within `timeout` seconds, else None (never raises)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(interval)


def timed(fn: Callable[[], object]) -> tuple[object, float]:
    started = time.monotonic()
    value = fn()
    return value, time.monotonic() - started


NOT_REPLICATED = "topology declared on one node does not reach the others yet (not through the metadata store)"


# ---------------------------------------------------------------- scenarios


@scenario("smoke")
def smoke(cluster: ComposeCluster, report: Report) -> None:
    """The cluster forms (every node sees 3 members and the same leader, docker calls each
    healthy, node 1's published ports answer), and messages published and consumed through
    node 1 on a durable queue all arrive."""
    leader = cluster.wait_converged(timeout=30)
    statuses = {n: cluster.status(n) for n in cluster.nodes}
    report.check("every node sees 3 members, all reachable",
                 all(s and len(s["members"]) == 3 and s["reachable"] == 3 for s in statuses.values()),
                 str({n: s and [m["node"] for m in s["members"]] for n, s in statuses.items()}))  # fmt: skip
    roles = sorted(s["role"] for s in statuses.values() if s)
    report.check("exactly one leader, the one every node names", roles == ["follower", "follower", "leader"]
                 and {s["leader"] for s in statuses.values()} == {cluster.node_id(leader)}, str(roles))  # fmt: skip
    health = {n: cluster.health(n) for n in cluster.nodes}
    report.check("docker health checks pass", set(health.values()) == {"healthy"}, str(health))

    from chaos_cluster import http

    overview = http("127.0.0.1", cluster.published["http"], "GET", "/api/overview")
    report.check("node 1's management port is published", overview.get("node") == "warren@warren1",
                 str(overview.get("node")))  # fmt: skip
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.published['metrics']}/metrics", timeout=5) as r:
        metrics = r.read().decode()
    report.check("node 1's metrics port is published", "rabbitmq_" in metrics, f"{len(metrics)} bytes")

    from proton import Message
    from proton.utils import BlockingConnection

    declare(cluster, "warren1", "chaos-smoke-published")
    conn = BlockingConnection(f"amqp://{cluster.env['WARREN_DEFAULT_USER']}:{cluster.env['WARREN_DEFAULT_PASSWORD']}"
                              f"@127.0.0.1:{cluster.published['amqp']}", timeout=10, allowed_mechs="PLAIN")  # fmt: skip
    try:
        conn.create_sender("/queues/chaos-smoke-published").send(Message(body="through the published port"))
        got = conn.create_receiver("/queues/chaos-smoke-published", credit=1).receive(timeout=10).body
    finally:
        conn.close()
    report.check("node 1's AMQP port is published (non-loopback user)", got == "through the published port")

    w = start_workload(cluster, report, "chaos-smoke", "warren1", publishers=2)
    time.sleep(6)
    q = finish_workload(w, report)
    report.check("no delivery failed", q.failed == 0 and q.indeterminate == 0,
                 f"failed {q.failed}, unknown {q.indeterminate}")  # fmt: skip


@scenario("kill9-restart")
def kill9_restart(cluster: ComposeCluster, report: Report) -> None:
    """kill -9 the metadata leader, which also hosts the queue under load: the two others
    elect a leader; the killed node comes back, rejoins, and no confirmed message is lost."""
    leader = cluster.wait_converged(timeout=30)
    term_before = term(cluster, leader)
    w = start_workload(cluster, report, "chaos-kill9", leader)
    time.sleep(4)
    cluster.kill9(leader)
    survivors = [n for n in cluster.nodes if n != leader]
    new_leader, elected = timed(lambda: cluster.wait_converged(survivors, timeout=30, full=False))
    report.time("new leader elected", elected)
    report.check("the survivors elect a new leader", new_leader in survivors, f"{new_leader} in {elected:.2f}s")
    time.sleep(2)
    _, back = timed(lambda: cluster.start(leader))
    report.time("killed node answers again", back)
    _, rejoined = timed(lambda: cluster.wait_converged(timeout=60))
    report.time("cluster converged with 3 members", rejoined)
    report.check("term advanced", (term(cluster, leader) or 0) > (term_before or 0))
    time.sleep(4)
    finish_workload(w, report)


@scenario("pause-leader")
def pause_leader(cluster: ComposeCluster, report: Report) -> None:
    """Freeze the metadata leader (docker pause) for 5 s, past the 0.5-1 s election timeout,
    with the queue on another node: a new leader is elected, metadata writes go on, and the
    old leader steps down once it thaws."""
    leader = cluster.wait_converged(timeout=30)
    others = [n for n in cluster.nodes if n != leader]
    queue_node = others[0]
    term_before = term(cluster, queue_node)
    w = start_workload(cluster, report, "chaos-pause", queue_node)
    time.sleep(3)
    cluster.pause(leader)
    paused_at = time.monotonic()
    new_leader, elected = timed(lambda: cluster.wait_converged(others, timeout=20, full=False))
    report.time("new leader elected", elected)
    report.check("a new leader among the others", new_leader in others, f"{new_leader} in {elected:.2f}s")
    status, body = declare_exchange(cluster, queue_node, "chaos-during-pause")
    report.check("a metadata write succeeds on the majority", status < 300, f"HTTP {status} {body}")
    time.sleep(max(0.0, 5.0 - (time.monotonic() - paused_at)))
    cluster.unpause(leader)
    _, converged = timed(lambda: cluster.wait_converged(timeout=30))
    report.time("converged after thaw", converged)
    final = cluster.agreed_leader()
    report.check("one leader after the thaw, in a later term",
                 final is not None and (term(cluster, final) or 0) > (term_before or 0),
                 f"{final}, term {term_before} -> {term(cluster, final) if final else None}")  # fmt: skip
    time.sleep(3)
    finish_workload(w, report)


def queue_leader(cluster: ComposeCluster, queue: str) -> str | None:
    """The container whose node leads `queue`'s Raft group (quorum), as any node reports it."""
    for node in cluster.nodes:
        try:
            leader = cluster.http(node, "GET", f"/api/queues/%2F/{queue}", timeout=5).get("leader") or ""
        except Exception:
            continue
        name = leader.split(":")[0]
        if name in cluster.nodes:
            return name
    return None


@scenario("isolate-queue-leader")
def isolate_queue_leader(cluster: ComposeCluster, report: Report) -> None:
    """Cut the queue's Raft leader off from the two others (iptables, both ways) for ~8 s under
    load: the two others elect a queue leader of their own and go on confirming; the cut one
    confirms nothing meanwhile; after healing one leader remains and nothing confirmed is lost."""
    leader = cluster.wait_converged(timeout=30)
    w = start_workload(cluster, report, "chaos-qleader", leader)
    time.sleep(3)
    qleader = queue_leader(cluster, "chaos-qleader")
    report.check("the queue has a Raft leader", qleader is not None, f"{qleader}")
    if qleader is None:
        finish_workload(w, report)
        return
    others = [n for n in cluster.nodes if n != qleader]
    cluster.partition(qleader)
    new, took = timed(lambda: poll(lambda: queue_leader_among(cluster, "chaos-qleader", others), 20))
    report.time("new queue leader", took)
    report.check("the majority elects a queue leader of its own", new in others, f"{new} in {took:.2f}s")
    time.sleep(8)
    cluster.heal()
    cluster.wait_converged(timeout=30)
    time.sleep(3)
    finish_workload(w, report)


def queue_leader_among(cluster: ComposeCluster, queue: str, nodes: list[str]) -> str | None:
    """The queue leader `nodes` agree on, when it is one of them."""
    seen = set()
    for node in nodes:
        try:
            seen.add((cluster.http(node, "GET", f"/api/queues/%2F/{queue}", timeout=5).get("leader") or "")
                     .split(":")[0])  # fmt: skip
        except Exception:
            return None
    return seen.pop() if len(seen) == 1 and next(iter(seen)) in nodes else None


@scenario("kill9-compacting")
def kill9_compacting(cluster: ComposeCluster, report: Report) -> None:
    """kill -9 the queue's leader three times under load while every group compacts its log
    every 50 entries (docker-compose.chaos.yml): a snapshot or a compaction is under way at
    the moment of most kills; each killed node restarts from its snapshot and journal, and
    nothing confirmed is lost."""
    leader = cluster.wait_converged(timeout=30)
    w = start_workload(cluster, report, "chaos-compact", leader)
    time.sleep(3)
    for round_ in range(3):
        victim = queue_leader(cluster, "chaos-compact") or leader
        cluster.kill9(victim)
        time.sleep(2)
        _, back = timed(lambda victim=victim: cluster.start(victim))
        report.time(f"kill {round_ + 1}: {victim} back", back)
        cluster.wait_converged(timeout=60)
        time.sleep(2)
    time.sleep(3)
    finish_workload(w, report)


@scenario("minority-partition")
def minority_partition(cluster: ComposeCluster, report: Report) -> None:
    """Cut the metadata leader off from the two others (iptables, both ways) for ~8 s while
    a workload runs on a majority node: the majority elects a leader and takes metadata
    writes, the minority's are refused (503 no_quorum); after healing, every node converges
    on one leader and sees every exchange the majority declared."""
    leader = cluster.wait_converged(timeout=30)
    majority = [n for n in cluster.nodes if n != leader]
    replicated = topology_replicated(cluster, "chaos-probe")
    w = start_workload(cluster, report, "chaos-partition", majority[0])
    time.sleep(3)
    cluster.partition(leader)
    cut_at = time.monotonic()
    new_leader, elected = timed(lambda: cluster.wait_converged(majority, timeout=30, full=False))
    report.time("majority elected a leader", elected)
    report.check("the majority elects a leader of its own", new_leader in majority, f"{new_leader}")
    stepped_down = poll(lambda: (cluster.status(leader) or {}).get("role") not in ("leader", None), 10)
    view = cluster.status(leader) or {}
    report.time("old leader stepped down", time.monotonic() - cut_at)
    report.check(
        "the cut-off old leader steps down",
        bool(stepped_down),
        f"role {view.get('role')}, sees {view.get('reachable')} of 3 reachable, majority {view.get('majority')}",
    )

    declared = [f"chaos-majority-{i}" for i in range(5)]
    results = {name: declare_exchange(cluster, majority[i % 2], name) for i, name in enumerate(declared)}
    bad = {k: v for k, v in results.items() if v[0] >= 300}
    report.check("metadata writes succeed on the majority", not bad, str(bad))
    before = cluster.status(leader) or {}
    minority_write, took = timed(lambda: declare_exchange(cluster, leader, "chaos-minority"))
    if replicated:
        report.check("a metadata write on the minority is refused (503)", minority_write[0] == 503,
                     f"HTTP {minority_write[0]} {minority_write[1]} after {took:.1f}s; the minority was "
                     f"{before.get('role')} in term {before.get('term')}, leader {before.get('leader')}")  # fmt: skip
        if minority_write[0] == 503:
            report.check(
                "the refused write is not visible on the minority", "chaos-minority" not in exchanges(cluster, leader)
            )
    else:
        report.skip("a metadata write on the minority is refused (503)", NOT_REPLICATED)
    time.sleep(max(0.0, 8.0 - (time.monotonic() - cut_at)))
    cluster.heal()
    _, healed = timed(lambda: cluster.wait_converged(timeout=30))
    report.time("converged after heal", healed)
    if replicated:
        seen, waited = timed(
            lambda: cluster.wait_for(
                lambda: all(set(declared) <= exchanges(cluster, n) for n in cluster.nodes), 20, "exchanges everywhere"
            )
        )
        report.time("every node sees the majority's exchanges", waited)
        report.check("every node sees the exchanges declared on the majority", bool(seen))
        views = {n: "chaos-minority" in exchanges(cluster, n) for n in cluster.nodes}
        if minority_write[0] == 503:
            report.check("the refused minority write appears nowhere", not any(views.values()), str(views))
    else:
        report.skip("every node sees the exchanges declared on the majority", NOT_REPLICATED)
    time.sleep(3)
    finish_workload(w, report)


@scenario("rolling-restart")
def rolling_restart(cluster: ComposeCluster, report: Report) -> None:
    """Restart every node in turn (SIGTERM, start, wait until the cluster has converged)
    under load, the queue's node last: the cluster keeps one leader throughout and no
    confirmed message is lost across the clean restarts."""
    leader = cluster.wait_converged(timeout=30)
    queue_node = "warren1"
    order = [n for n in cluster.nodes if n != queue_node] + [queue_node]
    w = start_workload(cluster, report, "chaos-rolling", queue_node)
    time.sleep(3)
    _, took = timed(lambda: cluster.rolling_restart(order))
    report.time("rolling restart of 3 nodes", took)
    final = cluster.agreed_leader()
    report.check("one leader for all after the rolling restart", final is not None, f"{leader} -> {final}")
    time.sleep(3)
    finish_workload(w, report)


# ---------------------------------------------------------------- command line


def main(argv: list[str]) -> int:
    import argparse

    from chaos_cluster import prepare_docker

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default="worktree", choices=["worktree", "head"])
    parser.add_argument("--keep-artifacts", default="", help="directory for logs and histories")
    parser.add_argument("names", nargs="*", default=list(SCENARIOS))
    args = parser.parse_args(argv)
    prepared = prepare_docker(source=args.source)
    for what, seconds in prepared.timings:
        print(f"{seconds:7.1f}s  {what}")
    rows = []
    for name in args.names:
        artifacts = Path(args.keep_artifacts) / name if args.keep_artifacts else None
        cluster = ComposeCluster(prepared.image, History(), artifacts=artifacts, compose=prepared.compose)
        try:
            _, up = timed(cluster.up)
            report = run_scenario(name, cluster)
            if not report.ok:
                cluster.save_artifacts()
        finally:
            cluster.down()
        q = report.queue.as_row() if report.queue else {}
        rows.append((name, report, up, q))
    print("\n| scenario | result | compose up | run | published | confirmed | consumed | lost | duplicated | "
          "longest unavailability | timings |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, report, up, q in rows:
        result = "ok" if report.ok else "FAILED"
        if report.ok and report.skipped:
            result += f" ({len(report.skipped)} skipped)"
        timings = ", ".join(f"{k} {v:.1f}s" for k, v in report.timings.items())
        print(f"| {name} | {result} | {up:.1f}s | {report.duration:.1f}s | {q.get('published', '')} | "
              f"{q.get('confirmed', '')} | {q.get('consumed', '')} | {q.get('lost', '')} | {q.get('duplicated', '')} | "
              f"{q.get('unavailability_s', '')}s | {timings} |")  # fmt: skip
    return 0 if all(r.ok for _, r, _, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
