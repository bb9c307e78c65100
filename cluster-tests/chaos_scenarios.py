"""Chaos scenarios: each one a function of a running ComposeCluster that runs a workload,
injects its faults on a schedule, and checks what must hold; it returns a Report.

    report = run_scenario("kill9-leader", cluster)
    print(report.text()); report.assert_ok()

Run them outside pytest (a fresh cluster each, a results table at the end):

    .venv/bin/python cluster-tests/chaos_scenarios.py [--source worktree|head] [NAME ...]

Every scenario runs two workloads at once (chaos_workload.py): publishers and consumers of
one durable queue, checked by the total-queue checker, and a thread changing metadata
(exchanges, bindings) through random nodes, checked against a final read of every node. Once
its last fault is over, a scenario waits for the cluster to converge (one leader for the
metadata group and for every quorum queue's group, named by every node) and fails when that
takes longer than CONVERGENCE_BOUND.

QUEUE_TYPE is the type of the workload's queue: "quorum" (the default; publishers on every
node, consumers on the nodes other than the declaring one), or "classic" with
WARREN_CHAOS_QUEUE_TYPE=classic (a classic queue lives on one node: clients talk to that node
unless WARREN_CHAOS_CROSS_NODE=1 sends them through the others).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from chaos_checker import CREATES, DECLARE_EXCHANGE, ENQUEUE, NO_REPLICA, REMOVES, QueueCheck, leader_disagreements
from chaos_cluster import ComposeCluster
from chaos_history import OK, History, Op
from chaos_report import Report, results_table
from chaos_workload import (
    MetadataWorkload,
    QueueWorkload,
    declare_queue,
    metadata_change,
    q_details,
)

QUEUE_TYPE = os.environ.get("WARREN_CHAOS_QUEUE_TYPE", "quorum")
CROSS_NODE = os.environ.get("WARREN_CHAOS_CROSS_NODE", "1" if QUEUE_TYPE == "quorum" else "0") == "1"
RATE = float(os.environ.get("WARREN_CHAOS_RATE", "40"))  # messages/s per publisher
METADATA_RATE = float(os.environ.get("WARREN_CHAOS_METADATA_RATE", "3"))  # metadata changes/s
CONVERGENCE_BOUND = float(os.environ.get("WARREN_CHAOS_CONVERGENCE_BOUND", "30"))  # seconds


SCENARIOS: dict[str, Callable[[ComposeCluster, Report], None]] = {}
REPORTS: list[Report] = []  # every report run_scenario made in this process, for a closing table
ALIASES = {"kill9-restart": "kill9-leader"}  # former names, still accepted by run_scenario


def scenario(name: str):
    """Register a scenario: a function (cluster, report) that fills the report."""

    def register(fn):
        SCENARIOS[name] = fn
        fn.scenario_name = name
        return fn

    return register


def run_scenario(name: str, cluster: ComposeCluster) -> Report:
    name = ALIASES.get(name, name)
    report = Report(name, cluster.history, setup=f"queue type {QUEUE_TYPE}, cross-node {CROSS_NODE}")
    try:
        SCENARIOS[name](cluster, report)
    except Exception as e:  # the report says where it stopped
        report.check("ran to the end", False, f"{type(e).__name__}: {str(e)[:3000]}")
    report.duration = time.monotonic() - report.started
    REPORTS.append(report)
    print("\n" + report.text(), flush=True)
    return report


# ---------------------------------------------------------------- workloads


@dataclass
class Workload:
    """A scenario's clients: the queue's publishers and consumers, and the metadata changer."""

    queue: QueueWorkload
    metadata: MetadataWorkload


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
                   rate: float = RATE, publish_nodes: list[str] | None = None) -> Workload:  # fmt: skip
    """Declare `queue` through `queue_node`, start its clients (clients(), or publishers on
    `publish_nodes`) and the metadata workload, and wait until publishes are confirmed."""
    declare(cluster, queue_node, queue)
    pub, con = clients(cluster, queue_node)
    pub = list(publish_nodes) if publish_nodes is not None else (pub * publishers)[: max(publishers, len(pub))]
    w = Workload(QueueWorkload(cluster, report.history, queue, queue_node, pub, con, rate=rate),
                 MetadataWorkload(cluster, report.history, rate=METADATA_RATE))  # fmt: skip
    w.metadata.start()
    w.queue.start()
    report.check("the workload runs before the faults", wait_confirms(report, 40, since=0.0, timeout=30))
    return w


def finish_workload(w: Workload, report: Report, drain_timeout: float = 60.0) -> QueueCheck:
    """Wait for publishes confirmed after the faults, stop the clients, drain the queue, and
    run both checkers (the metadata one after a final read of every node)."""
    recovered = wait_confirms(report, 40, timeout=30)
    report.check("publishes are confirmed again after the faults", recovered)
    w.metadata.stop()
    drained = w.queue.finish(drain_timeout=drain_timeout)
    cluster, queue = w.queue.cluster, w.queue.queue
    depth = "" if drained else "; ".join([f"depth {w.queue.queue_depth()}",
                                          *(f"{n}: {q_details(cluster, n, queue)}" for n in cluster.nodes)])  # fmt: skip
    report.check("queue drained after the faults", drained, depth)
    errors = w.queue.errors + w.metadata.errors
    report.check("workload clients ran without harness errors", not errors, "; ".join(errors))
    q = report.check_queue()
    report.check("messages flowed", q.confirmed > 0 and q.consumed > 0, f"confirmed {q.confirmed}")
    m = report.check_metadata(w.metadata.read_all)
    report.check("metadata changes were acknowledged", m.ok > 0, f"ok {m.ok} of {m.ops}")
    return q


def wait_confirms(report: Report, count: int, since: float | None = None, node: str | None = None,
                  timeout: float = 20.0) -> bool:  # fmt: skip
    """Until `count` publishes (through `node`, when given) begun at or after `since` (history
    time; default now) are confirmed. False when `timeout` passed first."""
    since = report.history.now() if since is None else since

    def confirmed() -> bool:
        ops = report.history.ops(f=ENQUEUE, type=OK)
        return sum(o.start >= since and (node is None or o.node == node) for o in ops) >= count

    return bool(poll(confirmed, timeout, interval=0.1))


# ---------------------------------------------------------------- helpers


def exchanges(cluster: ComposeCluster, node: str) -> set[str]:
    return {x["name"] for x in cluster.http(node, "GET", "/api/exchanges/%2F", timeout=10)}


def declare_exchange(cluster: ComposeCluster, node: str, name: str, timeout: float = 15.0) -> Op:
    """Declare a durable direct exchange through `node`, recorded in the history (process
    "scenario") so that check_metadata holds it to its outcome; meta["status"] is the HTTP
    status (0 when none came)."""
    return metadata_change(cluster, cluster.history, "scenario", DECLARE_EXCHANGE, node, name, timeout=timeout)


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


def queue_views(cluster: ComposeCluster, node: str) -> dict[str, dict]:
    """The node's quorum queues: name -> its /api/queues entry."""
    return {q["name"]: q for q in cluster.http(node, "GET", "/api/queues/%2F", timeout=5) if q.get("type") == "quorum"}


def queue_leader(cluster: ComposeCluster, queue: str) -> str | None:
    """The container whose node leads `queue`'s Raft group (quorum), as any node reports it."""
    for node in cluster.nodes:
        try:
            name = cluster.node_of(cluster.http(node, "GET", f"/api/queues/%2F/{queue}", timeout=5).get("leader"))
        except Exception:
            continue
        if name in cluster.nodes:
            return name
    return None


def queue_leader_among(cluster: ComposeCluster, queue: str, nodes: list[str]) -> str | None:
    """The queue leader `nodes` agree on, when it is one of them."""
    seen = set()
    for node in nodes:
        try:
            seen.add(cluster.node_of(cluster.http(node, "GET", f"/api/queues/%2F/{queue}", timeout=5).get("leader")))
        except Exception:
            return None
    return seen.pop() if len(seen) == 1 and next(iter(seen)) in nodes else None


def group_leaders(cluster: ComposeCluster) -> dict[str, dict[str, str | None] | None]:
    """For each node, the leader it names for the metadata group and for each quorum queue's
    group (NO_REPLICA where it holds none; None for a node that does not answer)."""
    views: dict[str, dict[str, str | None] | None] = {}
    for node in cluster.nodes:
        status = cluster.status(node)
        try:
            queues = queue_views(cluster, node) if status is not None else None
        except Exception:
            queues = None
        if status is None or queues is None:
            views[node] = None
            continue
        # a leader names itself, a follower the leader it follows, a candidate none
        view: dict[str, str | None] = {"metadata": cluster.node_of(status["leader"])}
        # with more nodes than replicas (5 and 3), a node without one knows no leader of its own
        view.update({f"queue {name}": cluster.node_of(q.get("leader"))
                     if node in {cluster.node_of(m) for m in q.get("members", ())} else NO_REPLICA
                     for name, q in queues.items()})  # fmt: skip
        views[node] = view
    return views


def converge(cluster: ComposeCluster, report: Report, bound: float = CONVERGENCE_BOUND) -> bool:
    """Once the faults are over: wait until every Raft group (metadata and every quorum queue)
    has one leader that every node names and that names itself, and every node sees every
    member reachable; report the time as "converged after the faults" and fail beyond `bound`."""
    started = time.monotonic()
    why: dict[str, str] = {}

    def converged() -> bool:
        nonlocal why
        views = group_leaders(cluster)
        why = leader_disagreements(views)
        statuses = [cluster.status(n) for n in cluster.nodes]
        if not why and not all(s and s["reachable"] == len(cluster.nodes) for s in statuses):
            why = {"metadata": "not every node sees every member reachable"}
        return not why

    ok = bool(poll(converged, bound, interval=0.25))
    took = time.monotonic() - started
    report.time("converged after the faults", took)
    groups = len(group_leaders(cluster).get(cluster.nodes[0]) or {})
    report.check(f"converged within {bound:.0f}s: one leader per Raft group, named by every node", ok,
                 f"{groups} groups in {took:.2f}s" if ok else "; ".join(f"{g}: {w}" for g, w in why.items()))  # fmt: skip
    return ok


def acknowledged_through(report: Report, node: str, fs: tuple[str, ...], start: float,
                         end: float) -> tuple[list[Op], list[Op]]:  # fmt: skip
    """(begun, acknowledged): the ops `fs` through `node` that began within [start, end]
    (history times), and those of them acknowledged (ok) by `end`."""
    ops = [o for o in report.history.ops() if o.f in fs and o.node == node and start <= o.start <= end]
    return ops, [o for o in ops if o.type == OK and o.end <= end]


def last_fault(report: Report, f: str) -> Op:
    return [o for o in report.history.faults() if o.f == f][-1]


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
    time.sleep(5)
    converge(cluster, report)
    q = finish_workload(w, report)
    report.check("no delivery failed", q.failed == 0 and q.indeterminate == 0,
                 f"failed {q.failed}, unknown {q.indeterminate}")  # fmt: skip
    m = report.metadata
    report.check("no metadata change unknown", m is not None and m.unknown == 0, f"{m and m.unknown} unknown")


@scenario("kill9-leader")
def kill9_leader(cluster: ComposeCluster, report: Report) -> None:
    """kill -9 the metadata leader, which also hosts the queue under load: the two others
    elect a leader; the killed node comes back, rejoins, and no confirmed message is lost."""
    leader = cluster.wait_converged(timeout=30)
    term_before = term(cluster, leader)
    w = start_workload(cluster, report, "chaos-kill9", leader)
    time.sleep(2)
    cluster.kill9(leader)
    survivors = [n for n in cluster.nodes if n != leader]
    new_leader, elected = timed(lambda: cluster.wait_converged(survivors, timeout=30, full=False))
    report.time("new leader elected", elected)
    report.check("the survivors elect a new leader", new_leader in survivors, f"{new_leader} in {elected:.2f}s")
    time.sleep(2)
    _, back = timed(lambda: cluster.start(leader))
    report.time("killed node answers again", back)
    converge(cluster, report)
    report.check("term advanced", (term(cluster, leader) or 0) > (term_before or 0))
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
    time.sleep(1)
    cluster.pause(leader)
    paused_at = time.monotonic()
    new_leader, elected = timed(lambda: cluster.wait_converged(others, timeout=20, full=False))
    report.time("new leader elected", elected)
    report.check("a new leader among the others", new_leader in others, f"{new_leader} in {elected:.2f}s")
    op = declare_exchange(cluster, queue_node, "chaos-during-pause")
    report.check("a metadata write succeeds on the majority", op.type == OK,
                 f"HTTP {op.meta.get('status')} {op.error or ''}")  # fmt: skip
    time.sleep(max(0.0, 5.0 - (time.monotonic() - paused_at)))
    cluster.unpause(leader)
    converge(cluster, report)
    final = cluster.agreed_leader()
    report.check("one leader after the thaw, in a later term",
                 final is not None and (term(cluster, final) or 0) > (term_before or 0),
                 f"{final}, term {term_before} -> {term(cluster, final) if final else None}")  # fmt: skip
    finish_workload(w, report)


@scenario("minority-partition")
def minority_partition(cluster: ComposeCluster, report: Report) -> None:
    """Cut a follower that serves clients (neither the metadata leader nor the queue's Raft
    leader; a publisher, and with quorum queues a consumer, on it) off from the two others
    for ~8 s: the majority keeps both leaders and goes on confirming and changing metadata;
    nothing published or changed through the cut node is acknowledged while it is cut
    (refused or unknown is fine, acknowledged-then-lost is not); after healing it catches up:
    it applies the metadata log up to where the leader was, names the same leaders, sees every
    acknowledged change, and confirms publishes again."""
    leader = cluster.wait_converged(timeout=30)
    queue = "chaos-minority"
    w = start_workload(cluster, report, queue, leader, publish_nodes=list(cluster.nodes))
    qleader = None
    if QUEUE_TYPE == "quorum":
        qleader = poll(lambda: queue_leader_among(cluster, queue, cluster.nodes), 20)
        report.check("the queue has a Raft leader", qleader is not None)
    cut = next(n for n in reversed(cluster.nodes) if n not in (leader, qleader))
    majority = [n for n in cluster.nodes if n != cut]
    report.check("the cut node is a follower with clients", cut in w.queue.publish_nodes,
                 f"cut {cut}; metadata leader {leader}, queue leader {qleader}; publishers on "
                 f"{w.queue.publish_nodes}, consumers on {w.queue.consume_nodes}")  # fmt: skip
    cluster.partition(cut)
    cut_at = time.monotonic()
    noticed = poll(lambda: (cluster.status(cut) or {}).get("majority") is False, 15)
    report.time("the cut node sees no majority", time.monotonic() - cut_at)
    report.check("the cut node sees it has no majority", bool(noticed), str(cluster.status(cut)))
    declared = [declare_exchange(cluster, node, f"chaos-minority-majority-{node}") for node in majority]
    report.check(
        "metadata writes through the majority are acknowledged during the cut",
        all(o.type == OK for o in declared),
        "; ".join(f"{o.node}: {o.type} {o.error or ''}" for o in declared),
    )
    refused = declare_exchange(cluster, cut, "chaos-minority-cut")
    report.check("a metadata write through the cut node is refused (503)", refused.meta.get("status") == 503,
                 f"HTTP {refused.meta.get('status')} {refused.error or ''}")  # fmt: skip
    time.sleep(max(0.0, 8.0 - (time.monotonic() - cut_at)))
    kept = cluster.agreed_leader(majority, full=False)
    report.check("the majority keeps its metadata leader", kept == leader, f"{leader} -> {kept}")
    if qleader is not None:
        kept_q = queue_leader_among(cluster, queue, majority)
        report.check("the majority keeps the queue leader", kept_q == qleader, f"{qleader} -> {kept_q}")
    role = (cluster.status(cut) or {}).get("role")
    report.check("the cut node does not lead", role != "leader", f"role {role}")
    at_heal = cluster.status(leader) or {}
    cluster.heal()
    window = (last_fault(report, "partition").end, last_fault(report, "heal").start)
    converge(cluster, report)
    caught_up = poll(lambda: ((cluster.status(cut) or {}).get("last_applied") or 0)
                     >= (at_heal.get("commit_index") or 0), 20)  # fmt: skip
    report.check("the cut node applies the metadata log up to the leader's commit at the heal", bool(caught_up),
                 f"leader's commit index {at_heal.get('commit_index')}, cut node applied "
                 f"{(cluster.status(cut) or {}).get('last_applied')}")  # fmt: skip
    again = wait_confirms(report, 10, node=cut, timeout=30)
    report.check("publishes through the cut node are confirmed again after healing", again)
    tried, acked = acknowledged_through(report, cut, (ENQUEUE,), *window)
    report.check("no publish through the cut node confirmed while it was cut", not acked and bool(tried),
                 f"{len(tried)} begun within the cut, {len(acked)} confirmed before the heal "
                 f"{[o.value for o in acked][:10]}")  # fmt: skip
    tried_md, acked_md = acknowledged_through(report, cut, CREATES + REMOVES, *window)
    report.check("no metadata change through the cut node acknowledged while it was cut", not acked_md,
                 f"{len(tried_md)} begun within the cut, {len(acked_md)} acknowledged before the heal "
                 f"{[o.value for o in acked_md][:5]}")  # fmt: skip
    finish_workload(w, report)


@scenario("isolate-metadata-leader")
def isolate_metadata_leader(cluster: ComposeCluster, report: Report) -> None:
    """Cut the metadata leader off from the two others (iptables, both ways) for ~8 s while
    a workload runs on a majority node: the majority elects a leader and takes metadata
    writes, the minority's are refused (503 no_quorum); after healing, every node converges
    on one leader and sees every exchange the majority declared."""
    leader = cluster.wait_converged(timeout=30)
    majority = [n for n in cluster.nodes if n != leader]
    w = start_workload(cluster, report, "chaos-partition", majority[0])
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
    bad = {k: f"HTTP {o.meta.get('status')} {o.error}" for k, o in results.items() if o.type != OK}
    report.check("metadata writes succeed on the majority", not bad, str(bad))
    before = cluster.status(leader) or {}
    minority_write = declare_exchange(cluster, leader, "chaos-minority")
    report.check("a metadata write on the minority is refused (503)", minority_write.meta.get("status") == 503,
                 f"HTTP {minority_write.meta.get('status')} {minority_write.error} after "
                 f"{minority_write.duration:.1f}s; the minority was {before.get('role')} in term {before.get('term')}, "
                 f"leader {before.get('leader')}")  # fmt: skip
    if minority_write.meta.get("status") == 503:
        invisible = "chaos-minority" not in exchanges(cluster, leader)
        report.check("the refused write is not visible on the minority", invisible)
    time.sleep(max(0.0, 8.0 - (time.monotonic() - cut_at)))
    cluster.heal()
    converge(cluster, report)
    # check_metadata (in finish_workload) holds the 5 and the refused one to their outcomes too
    seen = poll(lambda: all(set(declared) <= exchanges(cluster, n) for n in cluster.nodes), 15)
    report.check("every node sees the exchanges declared on the majority", bool(seen))
    if minority_write.meta.get("status") == 503:
        where = [n for n in cluster.nodes if "chaos-minority" in exchanges(cluster, n)]
        report.check("the refused minority write appears nowhere", not where, str(where))
    finish_workload(w, report)


@scenario("isolate-queue-leader")
def isolate_queue_leader(cluster: ComposeCluster, report: Report) -> None:
    """Cut the queue's Raft leader off from the two others (iptables, both ways) for ~8 s under
    load: the two others elect a queue leader of their own and go on confirming; the cut one
    confirms nothing meanwhile; after healing one leader remains and nothing confirmed is lost."""
    leader = cluster.wait_converged(timeout=30)
    w = start_workload(cluster, report, "chaos-qleader", leader)
    qleader = poll(lambda: queue_leader(cluster, "chaos-qleader"), 20)
    report.check("the queue has a Raft leader", qleader is not None, f"{qleader}")
    if qleader is None:
        finish_workload(w, report)
        return
    others = [n for n in cluster.nodes if n != qleader]
    cluster.partition(qleader)
    cut_at = time.monotonic()
    new, took = timed(lambda: poll(lambda: queue_leader_among(cluster, "chaos-qleader", others), 20))
    report.time("new queue leader", took)
    report.check("the majority elects a queue leader of its own", new in others, f"{new} in {took:.2f}s")
    time.sleep(max(0.0, 8.0 - (time.monotonic() - cut_at)))
    cluster.heal()
    converge(cluster, report)
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
    _, took = timed(lambda: cluster.rolling_restart(order))
    report.time("rolling restart of 3 nodes", took)
    converge(cluster, report)
    final = cluster.agreed_leader()
    report.check("one leader for all after the rolling restart", final is not None, f"{leader} -> {final}")
    finish_workload(w, report)


@scenario("kill9-compacting")
def kill9_compacting(cluster: ComposeCluster, report: Report) -> None:
    """kill -9 the queue's leader three times under load while every group compacts its log
    every 50 entries (docker-compose.chaos.yml): a snapshot or a compaction is under way at
    the moment of most kills; each killed node restarts from its snapshot and journal, and
    nothing confirmed is lost."""
    leader = cluster.wait_converged(timeout=30)
    w = start_workload(cluster, report, "chaos-compact", leader)
    for round_ in range(3):
        victim = queue_leader(cluster, "chaos-compact") or leader
        cluster.kill9(victim)
        time.sleep(2)
        _, back = timed(lambda victim=victim: cluster.start(victim))
        report.time(f"kill {round_ + 1}: {victim} back", back)
        if round_ < 2:
            cluster.wait_converged(timeout=60)
            time.sleep(2)
    converge(cluster, report)
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
        rows.append((report, up))
    print(results_table([r for r, _ in rows], {r.scenario: up for r, up in rows}))
    return 0 if all(r.ok for r, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
