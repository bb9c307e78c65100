"""A rolling upgrade under the chaos workload, as one run on one compose cluster.

    run = UpgradeRun(release, old_image, new_image, drain=True, refusal=True, artifacts=path)
    run.execute()             # starts and ends its own cluster; raises only when the harness cannot go on
    run.reports, run.steps, run.flags, run.refusal, run.table()

Three nodes of the previous release's image start; the chaos workload (chaos_workload.py)
runs on three queues, each declared through another node so that each replacement takes one
of them down or moves its leader: a quorum queue (warren1, replicas everywhere), a classic
queue (warren2) and a stream (warren3, chaos_stream.py), publishers on every node, plus the
metadata workload. Then, each one a step whose longest client unavailability is measured:

1. warren3, warren2, warren1 in turn: drained (with `drain`), stopped (SIGTERM), started from
   the new image on the same volume, waited for until the cluster converged, the node serves
   clients again and every queue confirms again. While an old node remains, each flag the new
   version adds (its FLAGS minus what an old node's API lists) must stay off, name the old
   members in `unsupported_by`, and enabling it must be refused.
2. enable the new flags, once every member supports them: enabled on every node and listed
   in every node's data-directory `feature_flags` file (what the downgrade refusal reads),
   plus the flag's own check in MIGRATION_CHECKS; skipped, with the reason, when there is none.
   With `drain`, quorum-queue leaders are then rebalanced (POST /api/rebalance/queues).
3. (with `refusal`) the downgrade refusal: one node stopped and started from the OLD image
   on its volume must exit 78 naming the flag; the new image then starts on it again and the
   cluster is whole. Without a new flag the old image is told by its test knob
   (WARREN_TEST_UNSUPPORTED_FLAGS) that it lacks the newest flag it knows and the cluster has
   on, as a build before that flag would: the same docker path, said so in the outcome.

Then the workload stops, every queue is drained and the total-queue checker reads each
queue's history; the metadata checker reads every node.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from chaos_checker import ENQUEUE, longest_gap
from chaos_cluster import ComposeCluster
from chaos_history import OK, History
from chaos_report import Report
from chaos_stream import StreamWorkload
from chaos_workload import MetadataWorkload, QueueWorkload, declare_queue, drain_all, queue_address
from http_json import HttpError
from proton import Timeout
from proton.utils import BlockingConnection
from releases import Release

# (queue, type, the node it is declared through): each replacement step hits one of them
QUEUES = (("upgrade-quorum", "quorum", "warren1"), ("upgrade-classic", "classic", "warren2"),
          ("upgrade-stream", "stream", "warren3"))  # fmt: skip
ORDER = ("warren3", "warren2", "warren1")  # the replacement order
REFUSAL_NODE = "warren3"
DATA_DIR = "/var/lib/warren/data"  # deploy/docker-compose.yml's WARREN_DATA_DIR
RATE = float(os.environ.get("WARREN_UPGRADE_RATE", "15"))  # messages/s per publisher (9 publishers)
METADATA_RATE = float(os.environ.get("WARREN_UPGRADE_METADATA_RATE", "2"))
STEP_TIMEOUT = 120.0
TABLES: list[str] = []  # every run's table, printed at the end of the pytest session (conftest.py)

# flag -> a check that its enabling migrated what it had to (cluster, the nodes): a flag whose
# enabling rewrites stored data or changes what nodes send registers one here
MIGRATION_CHECKS: dict[str, Callable[[ComposeCluster, list[str]], None]] = {}


def new_flags(known_by_old: set[str]) -> list[str]:
    """The working tree's flags the old release does not know, in declaration order."""
    from metadata.feature_flags import FLAGS  # this checkout's: the new image is built from it

    return [f.name for f in FLAGS if f.name not in known_by_old]


class DrainUnsupported(Exception):
    """The old release answers 404 to a drain."""


@dataclass
class Step:
    name: str
    node: str
    drained: bool
    started: float  # time.monotonic()
    ended: float = 0.0
    unavailable: dict[str, float] = field(default_factory=dict)  # queue type -> longest wait for a confirm
    confirmed: dict[str, int] = field(default_factory=dict)  # queue type -> confirms within the step
    versions: dict[str, str] = field(default_factory=dict)  # node -> product_version at the step's end


@dataclass
class FlagsOutcome:
    new: list[str] = field(default_factory=list)
    skipped: str = ""  # why the flag steps did not run
    mixed: list[str] = field(default_factory=list)  # what each check while an old node remained saw
    refused: dict[str, int] = field(default_factory=dict)  # flag -> HTTP status of enabling it while mixed
    enabled: list[str] = field(default_factory=list)
    files: dict[str, list[str]] = field(default_factory=dict)  # node -> its feature_flags file's list
    problems: list[str] = field(default_factory=list)


@dataclass
class RefusalOutcome:
    node: str = REFUSAL_NODE
    flags: list[str] = field(default_factory=list)  # what the old binary must name
    simulated: bool = False  # the old image told by its test knob that it lacks the flag
    exit_code: int | None = None
    message: str = ""  # its "refusing to start" line
    whole_again: bool = False  # the new image started on the volume and the cluster converged
    skipped: str = ""


class UpgradeRun:
    def __init__(self, release: Release, old_image: str, new_image: str, drain: bool, refusal: bool,
                 artifacts: Path | None = None) -> None:  # fmt: skip
        self.release, self.old_image, self.new_image = release, old_image, new_image
        self.drain, self.with_refusal, self.artifacts = drain, refusal, artifacts
        self.c: ComposeCluster | None = None
        self.workloads: dict[str, QueueWorkload] = {}  # queue type -> its workload
        self.metadata: MetadataWorkload | None = None
        self.steps: list[Step] = []
        self.drain_reports: dict[str, dict] = {}
        self.flags = FlagsOutcome()
        self.refusal = RefusalOutcome()
        self.reports: dict[str, Report] = {}  # queue type or "metadata" -> its checked report
        self.drained_queues: dict[str, bool] = {}
        self.serving: dict[str, str] = {}  # replaced node -> its maintenance state once started
        self.rebalanced: list[dict] | None = None  # POST /api/rebalance/queues' rows (drain runs)
        self.duration = 0.0

    @property
    def variant(self) -> str:
        return "drain" if self.drain else "no drain"

    # -- the run ---------------------------------------------------------------------------------

    def execute(self) -> None:
        started = time.monotonic()
        self.c = c = ComposeCluster(image=self.old_image, artifacts=self.artifacts)
        try:
            c.up()
            known = {f["name"]: f for f in c.http("warren1", "GET", "/api/feature_flags")}
            self.flags.new = new_flags(set(known))
            self._start_workload()
            for i, node in enumerate(ORDER):
                self._replace(node)
                if i < len(ORDER) - 1:
                    self._check_flags_while_mixed(upgraded=list(ORDER[: i + 1]))
            self._enable_new_flags()
            if self.drain:  # the procedure's last step: the drains moved the leaders off each node in turn
                self.rebalanced = c.http("warren1", "POST", "/api/rebalance/queues", {}, timeout=60)
            if self.with_refusal:
                self._downgrade_refused(known)
            self._finish_workload()
            if self.failures():
                self._keep_artifacts()
        except BaseException:
            self._keep_artifacts()
            raise
        finally:
            self._stop_clients()
            c.down()
            self.duration = time.monotonic() - started
            TABLES.append(self.table())
            print("\n" + self.table(), file=sys.stderr)

    def _start_workload(self) -> None:
        c = self.c
        for queue, qtype, node in QUEUES:
            declare_queue(c, node, queue, qtype)
            if qtype == "stream":  # one consumer, on the stream's node (chaos_stream.py)
                w = StreamWorkload(c, History(), queue, node, list(c.nodes), [node], rate=RATE)
            else:  # consumers on the two other nodes: through the proxy for the classic queue
                w = QueueWorkload(c, History(), queue, node, list(c.nodes), [n for n in c.nodes if n != node],
                                  rate=RATE)  # fmt: skip
            self.workloads[qtype] = w
        self.metadata = MetadataWorkload(c, History(), rate=METADATA_RATE)
        self.metadata.start()
        for w in self.workloads.values():
            w.start()
        self._wait_confirms(since=time.monotonic() - 3600, what="the workload confirming before the upgrade")

    def _confirm_ends(self, w: QueueWorkload) -> list[float]:
        """Monotonic times of the workload's confirms (its history counts from its own start)."""
        origin = time.monotonic() - w.history.now()
        return [origin + o.end for o in w.history.ops(f=ENQUEUE, type=OK)]

    def _wait_confirms(self, since: float, what: str, count: int = 5) -> None:
        """Until every queue has `count` confirms that came after `since` (monotonic)."""
        self.c.wait_for(lambda: all(sum(t > since for t in self._confirm_ends(w)) >= count
                                    for w in self.workloads.values()), STEP_TIMEOUT, what)  # fmt: skip

    def _wait_served(self, node: str, since: float) -> None:
        """Until a publisher on `node` got a confirm from the quorum queue after `since`."""
        w = self.workloads["quorum"]
        origin = time.monotonic() - w.history.now()
        self.c.wait_for(lambda: any(origin + o.end > since for o in w.history.ops(f=ENQUEUE, type=OK) if o.node == node),
                        STEP_TIMEOUT, f"a confirm through {node}")  # fmt: skip

    def _begin(self, name: str, node: str) -> Step:
        step = Step(name, node, self.drain, time.monotonic())
        self.steps.append(step)
        return step

    def _end(self, step: Step, back: float) -> None:
        """The step is over once the cluster converged, the node answers and every queue
        confirmed again after `back` (monotonic): its window closes there."""
        c = self.c
        c.wait_converged(timeout=STEP_TIMEOUT)
        self._wait_served(step.node, back)
        self._wait_confirms(back, f"every queue confirming again after {step.name}")
        step.ended = time.monotonic()
        for qtype, w in self.workloads.items():
            ends = self._confirm_ends(w)
            step.unavailable[qtype] = longest_gap(ends, step.started, step.ended)[0]
            step.confirmed[qtype] = sum(step.started <= t <= step.ended for t in ends)
        step.versions = {n: c.http(n, "GET", "/api/overview")["product_version"] for n in c.nodes}

    def _drain(self, node: str) -> None:
        try:
            report = self.c.http(node, "POST", "/api/maintenance/drain", {"timeout": 30}, timeout=60)
        except HttpError as e:
            if e.status == 404:  # a release before maintenance mode (v0.1.0)
                raise DrainUnsupported(f"{self.release.ref} has no maintenance mode to drain with") from None
            raise
        self.drain_reports[node] = report
        if not report.get("done"):
            raise AssertionError(f"drain of {node} not done: {report}")

    def _replace(self, node: str) -> None:
        c = self.c
        step = self._begin(f"replace {node}", node)
        if self.drain:
            self._drain(node)
        c.replace(node, self.new_image, timeout=STEP_TIMEOUT)
        self.serving[node] = c.http(node, "GET", "/api/maintenance")["state"]  # a restarted node serves
        self._end(step, time.monotonic())

    # -- feature flags -----------------------------------------------------------------------------

    def _flag(self, node: str, name: str) -> dict | None:
        return next((f for f in self.c.http(node, "GET", "/api/feature_flags") if f["name"] == name), None)

    def _check_flags_while_mixed(self, upgraded: list[str]) -> None:
        """Every new flag off, the old members named as lacking it, enabling it refused."""
        if not self.flags.new:
            return
        c = self.c
        old_ids = sorted(c.node_id(n) for n in c.nodes if n not in upgraded)
        via = upgraded[-1]  # a new node: an old one does not know the flag (404)

        def lacking_is_the_old_members(name: str) -> bool:  # the new node's member record comes a moment later
            f = self._flag(via, name)
            return f is not None and sorted(f.get("unsupported_by", [])) == old_ids

        for name in self.flags.new:
            try:
                c.wait_for(lambda name=name: lacking_is_the_old_members(name), 30, f"{name} lacked by {old_ids}")
            except AssertionError:
                self.flags.problems.append(f"{name} via {via}: {self._flag(via, name)}, expected lacking by {old_ids}")
            f = self._flag(via, name) or {}
            status = 200
            try:
                c.http(via, "PUT", f"/api/feature_flags/{name}/enable", {}, timeout=30)
            except HttpError as e:
                status = e.status
            self.flags.refused[name] = status
            states = {n: (self._flag(n, name) or {}).get("state", "unknown to it") for n in c.nodes}
            self.flags.mixed.append(f"after {len(upgraded)} of {len(c.nodes)}: {name} {states}, "
                                    f"unsupported_by {f.get('unsupported_by')}, enable answered {status}")  # fmt: skip
            if status != 409 or "enabled" in states.values():
                self.flags.problems.append(f"{name} with {old_ids} still old: enable answered {status}, {states}")

    def _enable_new_flags(self) -> None:
        c = self.c
        if not self.flags.new:
            self.flags.skipped = (f"no new feature flag: {self.release.ref} ({self.release.version}) knows every flag "
                                  "of the working tree")  # fmt: skip
            return
        step = self._begin("enable the new flags", "warren1")
        for name in self.flags.new:
            c.wait_for(lambda name=name: (self._flag("warren1", name) or {}).get("state") == "disabled", 30,
                       f"every member supporting {name}")  # fmt: skip
        for name in self.flags.new:
            answer = c.http("warren1", "PUT", f"/api/feature_flags/{name}/enable", {}, timeout=30)
            self.flags.enabled += [n for n in answer.get("enabled", []) if n not in self.flags.enabled]
        c.wait_for(lambda: all((self._flag(n, name) or {}).get("state") == "enabled"
                               for n in c.nodes for name in self.flags.new), 30, "the new flags enabled everywhere")  # fmt: skip
        for node in c.nodes:  # what the downgrade refusal reads, rewritten when the machine enabled them
            self.flags.files[node] = c.wait_for(lambda node=node: self._file_listing_new_flags(node), 30,
                                                f"{node}'s feature_flags file listing the new flags")  # fmt: skip
        for name in self.flags.new:
            check = MIGRATION_CHECKS.get(name)
            if check is not None:
                check(c, list(c.nodes))
        self._end(step, time.monotonic())

    def _file_listing_new_flags(self, node: str) -> list[str] | None:
        """The node's data-directory feature_flags file's list once it holds every new flag."""
        try:
            recorded = json.loads(self.c.exec(node, "cat", f"{DATA_DIR}/feature_flags"))
        except Exception:
            return None
        return recorded["enabled"] if set(self.flags.new) <= set(recorded["enabled"]) else None

    # -- the downgrade refusal -------------------------------------------------------------------

    def _downgrade_refused(self, known: dict[str, dict]) -> None:
        c, out = self.c, self.refusal
        if not self.release.has_downgrade_refusal:
            out.skipped = f"{self.release.ref} predates the downgrade refusal (no node/cluster/enabled_flags.py)"
            return
        env: dict[str, str] = {}
        if self.flags.new:
            out.flags = list(self.flags.new)
        else:  # the newest flag the old release knows and the cluster has on, taken away by the knob
            newest = [n for n, f in known.items() if f.get("state") == "enabled"][-1]
            out.flags, out.simulated = [newest], True
            env = {"WARREN_ENABLE_TEST_FAULTS": "true", "WARREN_TEST_UNSUPPORTED_FLAGS": newest}
        node = out.node
        step = self._begin(f"start {self.release.ref} on {node}'s data", node)
        if self.drain:
            self._drain(node)
        c.container(node).stop(timeout=30)
        c.images[node], c.node_env[node] = self.old_image, env
        c.compose("up", "-d", "--no-deps", "--no-build", node)
        container = c.container(node)
        try:
            out.exit_code = container.wait(timeout=60)["StatusCode"]
        except Exception as e:  # it did not exit: it runs on data it must refuse (replace stops it)
            out.message = f"still running after 60 s ({type(e).__name__})"
        logs = container.logs().decode(errors="replace")
        out.message = next((line for line in logs.splitlines() if "refusing to start" in line),
                           out.message or logs[-600:])  # fmt: skip
        c.replace(node, self.new_image, timeout=STEP_TIMEOUT)
        self._end(step, time.monotonic())
        out.whole_again = c.agreed_leader() is not None

    # -- the end -----------------------------------------------------------------------------------

    def _finish_workload(self) -> None:
        for w in self.workloads.values():
            w.stop_publishing()
        self.metadata.stop()
        undrained: dict[str, str] = {}
        drained = drain_all(list(self.workloads.values()), quiet=2.0, timeout=60.0)  # together: one quiet period
        for (qtype, w), ok in zip(self.workloads.items(), drained, strict=True):
            self.drained_queues[qtype] = ok
            if not ok:  # what the nodes and the clients say, before the clients stop
                undrained[qtype] = self._undrained(w)
            w.stop()
        for qtype, w in self.workloads.items():
            report = Report(f"upgrade {qtype}", w.history)
            report.check_queue()
            report.check("queue drained", self.drained_queues[qtype], undrained.get(qtype, ""))
            report.check("clients ran without harness errors", not w.errors, "; ".join(w.errors))
            self.reports[qtype] = report
        report = Report("upgrade metadata", self.metadata.history)
        report.check_metadata(self.metadata.read_all)
        report.check("metadata changes were acknowledged", report.metadata.ok > 0)
        self.reports["metadata"] = report

    def _undrained(self, w: QueueWorkload) -> str:
        """For a queue its consumers did not empty: each node's view of it, each consumer's last
        delivery and losses (history time), and where and when the oldest unconsumed confirmed
        messages were published."""
        ops = w.history.ops()
        parts = [f"depth {w.queue_depth()} at t={w.history.now():.1f}s"]
        parts += [f"{n}: {self._queue_view(n, w.queue)}" for n in self.c.nodes]
        for i, node in enumerate(w.consume_nodes):
            mine = [o for o in ops if o.process == f"consumer-{i}"]
            got = [o.end for o in mine if o.f == "dequeue"]
            lost = [f"{o.f} t={o.end:.1f}s {o.error or ''}"[:120] for o in mine if o.type != OK]
            parts.append(f"consumer-{i} on {node}: {len(got)} received, last at t={max(got, default=0):.1f}s, "
                         f"{len(lost)} failures {lost[-3:]}")  # fmt: skip
        consumed = {o.value for o in ops if o.f == "dequeue"}
        missing = sorted((o for o in ops if o.f == ENQUEUE and o.type == OK and o.value not in consumed),
                         key=lambda o: o.end)[:5]  # fmt: skip
        parts.append(
            "unconsumed: " + ", ".join(f"{o.value} via {o.node} t={o.start:.1f}-{o.end:.1f}s" for o in missing)
        )
        parts.append(f"a new consumer on {w.queue_node} itself got {self._fresh_consumer_gets(w)} at once")
        return "; ".join(parts)

    def _fresh_consumer_gets(self, w: QueueWorkload) -> object:
        """How many messages a new consumer on the queue's own node receives within 5 s (what
        tells a queue that does not dispatch from consumer links that stopped asking);
        not recorded in the history: the queue is already reported undrained."""
        if w.queue_node not in self.c.nodes or isinstance(w, StreamWorkload):
            return "n/a"
        try:
            conn = BlockingConnection(self.c.amqp_url(w.queue_node), timeout=10, allowed_mechs="PLAIN")
            try:
                receiver = conn.create_receiver(queue_address(w.queue), credit=100)
                got = []
                while True:
                    try:
                        got.append(receiver.receive(timeout=5).body)
                    except Timeout:
                        return got
            finally:
                conn.close()
        except Exception as e:
            return f"{type(e).__name__}: {e}"

    def _queue_view(self, node: str, queue: str) -> object:
        """What `node` says of the queue, for a failure's report."""
        try:
            q = self.c.http(node, "GET", f"/api/queues/%2F/{queue}", timeout=5)
        except Exception as e:
            return f"{type(e).__name__}: {e}"
        keys = ("node", "leader", "messages_ready", "messages_unacknowledged", "consumers", "consumer_details")
        return {k: q[k] for k in keys if k in q}

    def _stop_clients(self) -> None:
        for w in self.workloads.values():
            w.stop()
        if self.metadata is not None:
            self.metadata.stop()

    def _keep_artifacts(self) -> None:
        c = self.c
        c.save_artifacts()
        if self.artifacts is not None:
            self.artifacts.mkdir(parents=True, exist_ok=True)
            for qtype, w in self.workloads.items():
                w.history.dump(self.artifacts / f"history-{qtype}.jsonl")
        print(f"\n--- cluster logs (also in {self.artifacts}):\n{c.logs(tail=40)}", file=sys.stderr)

    # -- what it found -----------------------------------------------------------------------------

    def failures(self) -> list[str]:
        out = [f"{name}: {c.name}: {c.detail}" for name, r in self.reports.items() for c in r.failed]
        out += [f"flags: {p}" for p in self.flags.problems]
        return out

    def table(self) -> str:
        types = [t for _, t, _ in QUEUES]
        lines = [f"rolling upgrade {self.release.ref} ({self.release.version}, found by {self.release.found_by}) "
                 f"-> the working tree, "
                 f"{self.variant}, {self.duration:.0f}s",
                 "| step | converged and serving | " + " | ".join(f"{t}: longest wait" for t in types) + " |",
                 "|---|---|" + "---|" * len(types)]  # fmt: skip
        for s in self.steps:
            waits = " | ".join(f"{s.unavailable.get(t, 0):.2f}s ({s.confirmed.get(t, 0)})" for t in types)
            lines.append(f"| {s.name} | {s.ended - s.started:.1f}s | {waits} |")
        lines.append("| queue | published | confirmed | consumed | lost | duplicated | longest wait overall | valid |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for t in types:
            r = self.reports.get(t)
            if r is not None and r.queue is not None:
                q = r.queue.as_row()
                lines.append(f"| {t} | {q['published']} | {q['confirmed']} | {q['consumed']} | {q['lost']} | "
                             f"{q['duplicated']} | {q['unavailability_s']}s | {q['valid']} |")  # fmt: skip
        m = self.reports.get("metadata")
        if m is not None and m.metadata is not None:
            lines.append("metadata: " + m.metadata.summary().replace("\n", "; "))
        lines.append("flags: " + (self.flags.skipped or f"new {self.flags.new}, enabled {self.flags.enabled}, "
                                  f"refused while mixed {self.flags.refused}"))  # fmt: skip
        r = self.refusal
        if self.with_refusal:
            lines.append("downgrade: " + (r.skipped or f"{r.node} on {self.release.ref} exited {r.exit_code} "
                                          f"({'simulated: ' if r.simulated else ''}{r.flags}): {r.message.strip()}"))  # fmt: skip
        return "\n".join(lines)
