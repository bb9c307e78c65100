#!/usr/bin/env python3
"""A deep quorum queue: 1M messages of 1 KB with no consumer, then drained.

Issue [5/7] "Bounded memory": deep queues must not hold every body in memory
or in each snapshot, and log compaction must not stall the node. This script
measures that end to end on a 3-node cluster on loopback:

1. starts three ``warren server`` processes (bench/quorum.py's WarrenCluster:
   bench/procs.py process groups, the quorum_queue_v1 feature flag enabled), or
   with ``--broker rabbitmq`` three RabbitMQ 3.10 nodes (bench/quorum.py's
   RabbitCluster), and declares one quorum queue of 3 replicas through node 1;
2. publishes ``--messages`` (1,000,000) durable messages of ``--body`` (1024) B
   with confirms (``arrow send``, window 1000; ``--senders`` splits the count
   over several arrow connections), with NO consumer, on the queue's leader;
3. waits until every replica holds them all, rests ``--rest`` s, optionally
   restarts a follower (``--restart-follower``), then drains the queue with
   ``arrow receive`` on a follower node, counting exactly;
4. all along, every ``--interval`` (1 s), samples for every node: VmRSS,
   VmHWM, RssAnon (/proc/PID/status; for RabbitMQ summed over the node's
   process tree), CPU seconds, the data dir size on disk (allocated blocks),
   the Raft log store (Warren: ``DATA/raft``), the newest snapshot file(s) of
   the queue's group (Warren: ``DATA/cluster/qq.*/snapshot``; RabbitMQ:
   ``*/snapshots/*/``), the queue depth each node reports, and the machine's
   load average. Neither broker exposes an event-loop lag metric, so each
   node's loop is probed from outside: ``GET /api/overview`` back to back
   (``--probe-interval`` 0.25 s between answers), every answer time recorded.
   A probe still waiting when the run ends counts with its age.

The report gives, per node: the peak RSS (VmHWM) against the bytes of bodies
published, RSS at 0, 25, 50, 75 and 100 % of the messages (the first sample at
which the leader's depth reached the mark), after the drain and after a rest;
the snapshot size at full depth and how many snapshots were written; the data
dir; the longest API answer overall, while publishing, while draining and
within 2 s of a snapshot write (compaction); publish and drain rates; and,
with ``--restart-follower``, how long the restarted follower took to answer
and to hold the leader's depth again.

    .venv/bin/python bench/quorum_deep.py --messages 100000            # quick check (~2 min)
    .venv/bin/python bench/quorum_deep.py --json /tmp/deep.json        # 1M x 1 KB (~15-25 min)
    .venv/bin/python bench/quorum_deep.py --broker rabbitmq            # the same on RabbitMQ 3.10
    .venv/bin/python bench/quorum_deep.py --messages 200000 --restart-follower during

``--rss-limit-mib`` (8192): a node above it stops the run (the cluster is torn
down, the report says so) before the machine swaps. ``--samples FILE`` writes
every sample as one JSON line.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pair  # noqa: E402
import procs  # noqa: E402
from clusters import RabbitCluster, WarrenCluster, load_avg, prime  # noqa: E402
from quorum_deep_malloc import heap_totals  # noqa: E402
from quorum_deep_report import MIB, report  # noqa: E402
from quorum_deep_sampling import DepthPoller, Prober, Sampler, tree_pids  # noqa: E402

QUEUE = "deep"


# --------------------------------------------------------------------------- /proc and disk
class _Deep:
    """What both adapters share: their cluster object does the starting and counting."""

    cluster: Any

    def start(self) -> None:
        self.cluster.start()

    def stop(self) -> None:
        self.cluster.stop()

    @property
    def n(self) -> int:
        return self.cluster.n


class WarrenDeep(_Deep):
    """What the sampler needs of a Warren cluster, over bench/quorum.py's WarrenCluster."""

    key = "warren"

    def __init__(self, keep: bool, env: dict[str, str] | None = None):
        self.cluster = WarrenCluster(keep=keep, env=env)
        self.label = "Warren"

    def alive(self, i: int) -> bool:
        return self.cluster.c[i].running

    def pids(self, i: int) -> list[int]:
        node = self.cluster.c[i]
        return [node.proc.pid] if node.running else []

    def data_dir(self, i: int) -> str:
        return str(self.cluster.c[i].data_dir)

    def log_dir(self, i: int) -> str:
        return os.path.join(self.data_dir(i), "raft")

    def snapshot_files(self, i: int) -> list[str]:
        return glob.glob(os.path.join(self.data_dir(i), "cluster", "qq.*", "snapshot"))

    def http_get(self, i: int, path: str, timeout: float) -> Any:
        return self.cluster.http_get(i, path, timeout=timeout)

    def kill(self, i: int) -> None:
        self.cluster.c.kill9(i)

    def heap_totals(self, i: int) -> dict | None:
        node = self.cluster.c[i]
        return heap_totals(node.proc.pid, node.log_path) if node.running else None

    def restart(self, i: int) -> None:
        self.cluster.c.spawn(i)


class RabbitDeep(_Deep):
    """The same over bench/quorum.py's RabbitCluster (3 RabbitMQ 3.10 nodes)."""

    key = "rabbitmq"

    def __init__(self, keep: bool):
        self.cluster = RabbitCluster(keep=keep)
        self.label = "RabbitMQ 3.10"
        self._trees: dict[int, tuple[float, list[int]]] = {}

    def start(self) -> None:
        self.cluster.start()
        self.label = self.cluster.label

    def alive(self, i: int) -> bool:
        proc = self.cluster.nodes[i].proc
        return proc is not None and proc.poll() is None

    def pids(self, i: int) -> list[int]:
        if not self.alive(i):
            return []
        now = time.monotonic()
        cached = self._trees.get(i)
        if cached is None or now - cached[0] > 10:  # the tree changes rarely (port helpers)
            cached = self._trees[i] = (now, tree_pids(self.cluster.nodes[i].proc.pid))
        return cached[1]

    def data_dir(self, i: int) -> str:
        return os.path.join(self.cluster.nodes[i].base, "mnesia")

    def log_dir(self, i: int) -> str:
        found = glob.glob(os.path.join(self.data_dir(i), "*", "quorum"))  # 3.10: mnesia/NODE/quorum, ra's WAL
        return found[0] if found else os.path.join(self.data_dir(i), "quorum")  # and segments

    def snapshot_files(self, i: int) -> list[str]:
        # ra keeps <uid>/snapshots/<index>_<term>/snapshot.dat per queue; the newest only, per queue
        out = []
        for snaps in glob.glob(os.path.join(self.data_dir(i), "**", "snapshots"), recursive=True):
            dirs = sorted(glob.glob(os.path.join(snaps, "*")), key=os.path.getmtime)
            if dirs:
                out.extend(p for p in glob.glob(os.path.join(dirs[-1], "*")) if os.path.isfile(p))
        return out

    def http_get(self, i: int, path: str, timeout: float) -> Any:
        return self.cluster.http_get(i, path, timeout=timeout)

    def kill(self, i: int) -> None:
        procs.stop(self.cluster.nodes[i].proc, term_timeout=0.1, sig=9)

    def restart(self, i: int) -> None:
        raise NotImplementedError("--restart-follower is Warren only")


# --------------------------------------------------------------------------- probes and sampler
def arrow_proc(args: Any, mode: str, port: int, address: str, count: int, out_path: str) -> subprocess.Popen:
    a = pair.arrow_args("127.0.0.1", port, address, count, args.body, args.credit, args.window, durable=True,
                        settled=False, idle_timeout=args.idle_timeout)  # fmt: skip
    with open(out_path, "wb") as out, open(out_path + ".err", "wb") as err:
        return subprocess.Popen([args.arrow, mode, *a], stdout=out, stderr=err, stdin=subprocess.DEVNULL)


def read_heaps(broker: Any) -> list[dict | None]:
    """glibc's heap totals of every node (Warren only; None where not read)."""
    if not hasattr(broker, "heap_totals"):
        return [None] * broker.n
    return [broker.heap_totals(i) for i in range(broker.n)]


def wait_procs(ps: list[subprocess.Popen], abort: threading.Event, timeout: float) -> bool:
    """Wait for every process; False (and kill them) on abort or timeout."""
    deadline = time.monotonic() + timeout
    while any(p.poll() is None for p in ps):
        if abort.is_set() or time.monotonic() > deadline:
            for p in ps:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            return False
        time.sleep(0.2)
    return True


def wait_depth(sampler: Sampler, depth: list[DepthPoller], nodes: list[int], want: int, timeout: float) -> float | None:
    """Seconds until every node in `nodes` reports `want` messages; None on timeout/abort."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout and not sampler.abort.is_set():
        if all(depth[i].depth == want for i in nodes):
            return time.monotonic() - t0
        time.sleep(0.2)
    return None


def run(args: Any) -> dict:
    node_env = dict(kv.split("=", 1) for kv in args.node_env)
    broker: Any = WarrenDeep(args.keep, node_env) if args.broker == "warren" else RabbitDeep(args.keep)
    res: dict[str, Any] = {"broker": args.broker, "messages": args.messages, "body": args.body,
                           "load_start": load_avg(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}  # fmt: skip
    stop = threading.Event()
    tmp = tempfile.mkdtemp(prefix="warren-bench-deep-")
    out = open(args.samples, "w") if args.samples else None  # noqa: SIM115
    sampler = None
    probes: list[Prober] = []
    try:
        broker.start()
        c = broker.cluster
        c.declare(QUEUE, 3, via=0)
        c.wait_queue(QUEUE, timeout=60)
        prime(c, QUEUE)
        q = c.wait_queue(QUEUE)
        leader = c.index_of(q["leader"])
        members = sorted(c.index_of(m) for m in q["members"])
        followers = [i for i in members if i != leader]
        pub = leader if args.publisher == "leader" else int(args.publisher)
        con = followers[0] if args.consumer == "follower" else int(args.consumer)
        restart_node = next((i for i in followers if i != con), followers[-1])
        res.update(leader=leader, members=members, publisher=pub, consumer=con)
        print(
            f"[deep] {broker.label}: queue {QUEUE} leader n{leader}, members {members}; publisher on n{pub}, "
            f"consumer on n{con}; load {load_avg()}",
            file=sys.stderr,
        )

        t0 = time.monotonic()
        depth = [DepthPoller(broker, i, QUEUE, stop) for i in range(broker.n)]
        probes = [Prober(broker, i, t0, stop, args.probe_interval) for i in range(broker.n)]
        sampler = Sampler(broker, t0, stop, args.interval, depth, probes, args.rss_limit_mib * MIB, out)
        for th in (*depth, *probes, sampler):
            th.start()
        sampler.phase = "idle"
        sampler.abort.wait(args.rest)
        if args.malloc_stats:
            res["heap_idle"] = read_heaps(broker)

        # -- publish, no consumer
        sampler.phase = "publish"
        res["load_publish_start"] = load_avg()
        counts = [args.messages // args.senders + (1 if k < args.messages % args.senders else 0)
                  for k in range(args.senders)]  # fmt: skip
        outs = [os.path.join(tmp, f"send{k}") for k in range(args.senders)]
        t_pub = time.monotonic()
        res["publish_t"] = [round(t_pub - t0, 2)]
        senders = [arrow_proc(args, "send", c.amqp_port(pub), c.address(QUEUE), n, o)
                   for n, o in zip(counts, outs, strict=True)]  # fmt: skip
        killed_at = None
        if args.restart_follower == "during":
            while any(p.poll() is None for p in senders) and not sampler.abort.is_set():
                if (depth[leader].depth or 0) >= args.messages // 2:
                    broker.kill(restart_node)
                    killed_at = time.monotonic()
                    print(
                        f"[deep] killed follower n{restart_node} (-9) at depth {depth[leader].depth}", file=sys.stderr
                    )
                    break
                time.sleep(0.2)
        finished = wait_procs(senders, sampler.abort, args.messages / 100 + 600)
        res["publish_t"].append(round(time.monotonic() - t0, 2))
        sent = [pair._load(o) or {} for o in outs]
        res["senders"] = sent
        accepted = sum(s.get("accepted", 0) for s in sent)
        bad = sum(s.get("rejected", 0) + s.get("released", 0) + s.get("modified", 0) for s in sent)
        first = min((s["t_first"] for s in sent if s.get("t_first")), default=0)
        last = max((s["t_last"] for s in sent if s.get("t_last")), default=0)
        res.update(published_accepted=accepted, published_other=bad, publish_finished=finished,
                   publish_rate=round(accepted / (last - first)) if last > first else 0,
                   publish_errors=[s.get("error") for s in sent if s.get("error")],
                   load_publish_end=load_avg())  # fmt: skip
        print(
            f"[deep] published: {accepted} accepted, {bad} other, {res['publish_rate']} msg/s; load {load_avg()}",
            file=sys.stderr,
        )
        if sampler.abort.is_set() or not finished:
            res["aborted"] = sampler.over_limit or "publish did not finish"
            return res

        # -- every replica holds them all, then rest
        sampler.phase = "full"
        live = [i for i in members if broker.alive(i)]
        settle = wait_depth(sampler, depth, live, accepted, args.settle_timeout)
        res["replicas_full_after_s"] = None if settle is None else round(settle, 1)
        res["full_t"] = round(time.monotonic() - t0, 2)
        if sampler.abort.wait(args.rest if args.full_rest is None else args.full_rest):
            res["aborted"] = sampler.over_limit
            return res
        if args.malloc_stats:
            res["heap"] = {"idle": res["heap_idle"], "full": read_heaps(broker)}

        # -- optional: a follower restarted (-9 during the publish, or now)
        if args.restart_follower != "none":
            if args.restart_follower == "after":
                broker.kill(restart_node)
                killed_at = time.monotonic()
                time.sleep(2)
            sampler.phase = "catch-up"
            t_re = time.monotonic()
            broker.restart(restart_node)
            http_up = None
            while time.monotonic() - t_re < args.settle_timeout and not sampler.abort.is_set():
                if http_up is None:
                    try:
                        broker.http_get(restart_node, "/api/overview", timeout=5)
                        http_up = time.monotonic() - t_re
                    except Exception:  # noqa: BLE001
                        pass
                if depth[restart_node].depth == accepted:
                    break
                time.sleep(0.2)
            caught = time.monotonic() - t_re if depth[restart_node].depth == accepted else None
            res["restart"] = {"node": restart_node, "mode": args.restart_follower,
                              "down_s": round(t_re - killed_at, 1) if killed_at else None,
                              "http_up_s": None if http_up is None else round(http_up, 2),
                              "caught_up_s": None if caught is None else round(caught, 2),
                              "t": round(t_re - t0, 2)}  # fmt: skip
            print(f"[deep] restarted n{restart_node}: {res['restart']}", file=sys.stderr)
            time.sleep(args.rest)

        # -- drain
        sampler.phase = "consume"
        res["load_consume_start"] = load_avg()
        r_out = os.path.join(tmp, "recv")
        t_con = time.monotonic()
        res["consume_t"] = [round(t_con - t0, 2)]
        recv = arrow_proc(args, "receive", c.amqp_port(con), c.address(QUEUE), accepted, r_out)
        finished = wait_procs([recv], sampler.abort, accepted / 100 + 600)
        res["consume_t"].append(round(time.monotonic() - t0, 2))
        got = pair._load(r_out) or {}
        res.update(receiver=got, consumed=got.get("done", 0), consume_rate=got.get("rate", 0),
                   consume_finished=finished, load_consume_end=load_avg())  # fmt: skip
        print(f"[deep] consumed: {got.get('done')} at {got.get('rate')} msg/s; load {load_avg()}", file=sys.stderr)
        if sampler.abort.is_set() or not finished:
            res["aborted"] = sampler.over_limit or "consume did not finish"
            return res
        sampler.phase = "drained"
        empty = wait_depth(sampler, depth, [i for i in members if broker.alive(i)], 0, 120)
        res["replicas_empty_after_s"] = None if empty is None else round(empty, 1)
        res["left_in_queue"] = {f"n{i}": depth[i].depth for i in range(broker.n)}
        time.sleep(args.rest)
        if args.malloc_stats:
            res["heap"]["drained"] = read_heaps(broker)
        sampler.phase = "end"
        time.sleep(min(args.rest, 5))
        res["info_end"] = {f"n{i}": {k: depth[i].info.get(k) for k in ("messages", "messages_unacknowledged",
                                                                       "leader", "members")}
                           for i in range(broker.n)}  # fmt: skip
        return res
    finally:
        stop.set()
        for th in probes:
            th.join(2)
        if sampler is not None:
            sampler.join(5)
            res["samples"] = sampler.samples
            res["snap_writes"] = sampler.snap_writes
            if sampler.over_limit:
                res["aborted"] = sampler.over_limit
        res["probes"] = [p.records for p in probes]
        res["probe_waiting_at_end"] = [round(p.waiting(), 2) for p in probes]
        res["load_end"] = load_avg()
        broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        if out is not None:
            out.close()


# --------------------------------------------------------------------------- report
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="A deep quorum queue (1M x 1 KB): memory, snapshots, compaction stalls.")
    ap.add_argument("--broker", choices=("warren", "rabbitmq"), default="warren")
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--body", type=int, default=1024)
    ap.add_argument("--senders", type=int, default=1, help="arrow senders in parallel, the count split among them")
    ap.add_argument("--credit", type=int, default=1000)
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--publisher", default="leader", help="'leader' or a node index")
    ap.add_argument("--consumer", default="follower", help="'follower' or a node index")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    ap.add_argument("--probe-interval", type=float, default=0.25, help="pause between API probes of a node")
    ap.add_argument("--rest", type=float, default=10.0, help="seconds of rest before, between and after the phases")
    ap.add_argument(
        "--full-rest",
        type=float,
        help="seconds of rest at full depth (default --rest); over 300 "
        "lets pysyncobj's time-based compaction (logCompactionMinTime 300 s) snapshot the full queue",
    )
    ap.add_argument(
        "--snapshot-entries",
        type=int,
        help="Warren: log entries between a quorum queue's snapshots "
        "(WARREN_QUORUM_SNAPSHOT_ENTRIES; default the node's, 2000)",
    )
    ap.add_argument("--settle-timeout", type=float, default=300.0)
    ap.add_argument("--idle-timeout", type=float, default=120.0, help="arrow's idle timeout")
    ap.add_argument("--restart-follower", choices=("none", "after", "during"), default="none",
                    help="kill -9 the follower without the consumer when the publish is half done (during) or "
                         "done (after), restart it after the publish, time its catch-up")  # fmt: skip
    ap.add_argument("--rss-limit-mib", type=int, default=8192, help="stop the run when a node's RSS passes this")
    ap.add_argument("--node-env", action="append", default=[], metavar="KEY=VALUE",
                    help="Warren: an environment variable for the nodes only (repeatable), e.g. MALLOC_ARENA_MAX=2 "
                         "or LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2")  # fmt: skip
    ap.add_argument("--malloc-stats", action="store_true",
                    help="Warren: read each node's glibc heap totals (gdb, malloc_stats) at rest when idle, full "
                         "and drained")  # fmt: skip
    ap.add_argument("--arrow", default=pair.DEFAULT_ARROW)
    ap.add_argument("--keep", action="store_true", help="keep the data dirs")
    ap.add_argument("--samples", help="write every sample here, one JSON line each")
    ap.add_argument("--json", help="write the whole result (samples and probes included) here")
    args = ap.parse_args(argv)
    if not os.access(args.arrow, os.X_OK):
        print(f"arrow not found at {args.arrow}: run bench/setup.sh", file=sys.stderr)
        return 2
    if args.restart_follower != "none" and args.broker != "warren":
        ap.error("--restart-follower is Warren only")
    if args.snapshot_entries is not None:
        if args.broker != "warren":
            ap.error("--snapshot-entries is Warren only")
        os.environ["WARREN_QUORUM_SNAPSHOT_ENTRIES"] = str(args.snapshot_entries)  # the nodes inherit it
    procs.install_handlers()
    try:
        res = run(args)
    except KeyboardInterrupt:
        procs.cleanup_all()
        return 130
    res["args"] = vars(args)
    res["host"] = platform.node()
    print(
        f"## {res.get('broker')}: deep quorum queue, {args.messages:,} x {args.body} B, started {res.get('started')}\n"
    )
    print(report(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, default=str)
    ok = (not res.get("aborted") and res.get("published_accepted") == args.messages
          and res.get("consumed") == args.messages)  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
