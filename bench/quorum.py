#!/usr/bin/env python3
"""Quorum queues side by side: a 3-node Warren cluster vs a 3-node RabbitMQ 3.10 cluster.

The quorum-queue counterpart of bench/run.py.  One cluster at a time (so that
the two never share the 2 cores), each on loopback:

* Warren: three ``warren server`` processes forming one cluster (the
  launcher of tests/support/cluster_procs.py, started through bench/procs.py
  so that they are stopped on exit, Ctrl-C or SIGTERM);
* RabbitMQ 3.10: three nodes ``warren_qq{1,2,3}@localhost`` from the Debian
  package (bench/rabbitmq.py's RabbitNode, one shared Erlang cookie, their
  own AMQP/management/distribution ports and mnesia/log dirs, plugins
  rabbitmq_amqp1_0 + rabbitmq_management), nodes 2 and 3 joined to node 1
  with ``rabbitmqctl stop_app; join_cluster; start_app``.

Workloads: a quorum queue with 3 replicas and one with 1 replica
(``x-quorum-initial-group-size``), durable messages, 12 B bodies, credit 1000,
window 1000, one arrow sender and one arrow receiver (bench/pair.py).  Every
run declares a fresh queue through node 1's HTTP API, so on both brokers its
first leader (and, with 1 replica, its only member) is node 1.  Layout
(``--layout``):

* ``pub-leader`` (default): the publisher on the queue's leader node, the
  consumer on another node (a follower with 3 replicas; a node without a
  replica with 1);
* ``pub-follower``: the publisher on another node, the consumer on the leader's;
* ``split``: the publisher and the consumer on the two nodes that are not the leader;
* ``same``: both on the leader's node.

Reported: end-to-end msg/s, p50/p99 send-to-receive latency, the ratio
Warren/RabbitMQ, the 1-minute load average and CPU idle before each run, and
whether the queue's leader changed during the run.

    .venv/bin/python bench/quorum.py                       # both, 50k messages per run
    .venv/bin/python bench/quorum.py --brokers warren --count 20000 --repeat 3
    .venv/bin/python bench/quorum.py --brokers warren --profile /tmp/qqprof   # where Warren's time goes

``--profile DIR`` profiles each Warren node's event loop (cProfile, in the
node process: see ``profiled_node``) during every measured run and prints
each node's top functions at the end (``--profile-clock wall``, the default
and the cheaper: elapsed time, so blocking calls such as fdatasync and time
spent waiting for a core show; ``cpu``: the loop thread's CPU time, at a
system call per profiled event). Rates measured that way are slowed down by
the profiler and only say where the time goes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "support"))
import pair  # noqa: E402
import procs  # noqa: E402
from clusters import RabbitCluster, WarrenCluster, load_avg, prime, profiled_node, trees_cpu_seconds  # noqa: E402
from run import cpu_idle, wait_idle  # noqa: E402

WORKLOADS = {  # key -> (label, replicas)
    "qq3": ("quorum queue, 3 replicas", 3),
    "qq1": ("quorum queue, 1 replica", 1),
}
LAYOUTS = ("pub-leader", "pub-follower", "split", "same")



class LeaderWatch:
    """Samples the queue's leader (as node 0 sees it) every `period` s in a thread."""

    def __init__(self, broker, name: str, period: float = 2.0):
        self.broker, self.name, self.period = broker, name, period
        self.seen: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            v = self.broker.info(self.name)
            leader = v.get("leader") if v else None
            if leader and (not self.seen or self.seen[-1] != leader):
                self.seen.append(leader)

    def __enter__(self) -> LeaderWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(10)


def place(layout: str, leader: int, members: list[int], n: int) -> tuple[int, int]:
    """(publisher node, consumer node) for a layout."""
    others = [i for i in range(n) if i != leader]
    # prefer another replica for the "other" node (a follower), else any other node
    followers = [i for i in others if i in members] + [i for i in others if i not in members]
    if layout == "pub-leader":
        return leader, followers[0]
    if layout == "pub-follower":
        return followers[0], leader
    if layout == "split":
        return followers[0], followers[1]
    return leader, leader


def run_pair_split(*, host: str, pub_port: int, con_port: int, address: str, count: int, body: int, credit: int,
                   window: int, durable: bool, idle_timeout: float, arrow: str,
                   ready: Any = None, ready_timeout: float = 15.0, grace: float = 0.2) -> dict:  # fmt: skip
    """bench/pair.py's run_pair with the receiver on con_port and the sender on pub_port
    (the receiver starts first; the sender once it is connected and `ready()`)."""
    timeout = 60 + count / 500
    common = dict(count=count, body=body, credit=credit, window=window, durable=durable, settled=False,
                  idle_timeout=idle_timeout)  # fmt: skip
    r_args = pair.arrow_args(host, con_port, address, **common)
    s_args = pair.arrow_args(host, pub_port, address, **common)
    with tempfile.TemporaryDirectory(prefix="warren-bench-qq-pair-") as tmp:
        r_out, s_out, r_err, s_err = (os.path.join(tmp, x) for x in ("r", "s", "r.err", "s.err"))
        recv = sender = None
        try:
            with open(r_out, "wb") as o, open(r_err, "wb") as e:
                recv = subprocess.Popen([arrow, "receive", *r_args], stdout=o, stderr=e, stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + ready_timeout
            while not pair.connected(recv.pid, con_port):
                if recv.poll() is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            if ready is not None:
                while recv.poll() is None and time.monotonic() < deadline and not ready():
                    time.sleep(0.05)
            if recv.poll() is None:
                time.sleep(grace)
            with open(s_out, "wb") as o, open(s_err, "wb") as e:
                sender = subprocess.Popen([arrow, "send", *s_args], stdout=o, stderr=e, stdin=subprocess.DEVNULL)
            end = time.monotonic() + timeout
            sc = sender.wait(max(1.0, end - time.monotonic()))
            rc = recv.wait(max(1.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            sc = rc = None
        finally:
            for p in (sender, recv):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait()
        return pair._result(pair._load(s_out), pair._load(r_out), sc, rc, pair._read(s_err) + pair._read(r_err))


def cpu_seconds(broker) -> float:
    """User + system CPU of every broker process so far (all nodes): CPU per message
    is what a busy machine disturbs least."""
    return sum(node_cpu_seconds(broker))


def node_cpu_seconds(broker) -> list[float]:
    return trees_cpu_seconds(broker.process_trees())


def run_workload(broker, key: str, replicas: int, args, tag: str, layout: str, body: int) -> dict:
    name = f"bench-{key}-{tag}"
    broker.declare(name, replicas, via=0)
    broker.wait_queue(name)
    prime(broker, name)
    q = broker.wait_queue(name)
    leader = broker.index_of(q["leader"])
    members = [broker.index_of(m) for m in q["members"]]
    pub, con = place(layout, leader, members, broker.n)
    idle = wait_idle(args.min_idle, args.wait_idle) if args.wait_idle > 0 else cpu_idle()
    load = load_avg()
    print(f"[bench] {broker.key}: {key} {layout} {body} B {tag}: leader n{leader}, members {sorted(members)}, "
          f"publisher n{pub}, consumer n{con}; load {load[0]}, CPU idle {idle:.0%}", file=sys.stderr)
    t0 = time.monotonic()
    cpu0 = node_cpu_seconds(broker)
    if getattr(broker, "profile_dir", None):
        broker.profile_start(f"{key}-{layout}-{body}-{tag}")
    with LeaderWatch(broker, name) as watch:
        res = run_pair_split(host="127.0.0.1", pub_port=broker.amqp_port(pub), con_port=broker.amqp_port(con),
                             address=broker.address(name), count=args.count, body=body, credit=args.credit,
                             window=args.window, durable=True, idle_timeout=args.idle_timeout, arrow=args.arrow,
                             ready=lambda: broker.consumers(name, con) >= 1)  # fmt: skip
    wall = time.monotonic() - t0
    per_node = [(b - a) / max(1, args.count) * 1e6 for a, b in zip(cpu0, node_cpu_seconds(broker), strict=True)]
    cpu_us = sum(per_node)  # whole cluster, per message
    if getattr(broker, "profile_dir", None):
        broker.profile_stop()
    after = broker.info(name) or {}
    leaders = [q["leader"], *[x for x in watch.seen if x != q["leader"]]]
    if after.get("leader") and after["leader"] != leaders[-1]:
        leaders.append(after["leader"])
    res.update(queue=name, layout=layout, body=body, leader=leader, members=sorted(members), publisher=pub, consumer=con,
               load_before=load, load_after=load_avg(), cpu_idle_before=round(idle, 3), wall_s=round(wall, 1),
               leaders_seen=[f"n{broker.index_of(x)}" for x in leaders], leader_changed=len(leaders) > 1,
               left_in_queue=after.get("messages"), cpu_us_per_msg=round(cpu_us, 1),
               node_cpu_us_per_msg=[round(x, 1) for x in per_node],
               node_cpu_share=[round(x * res.get("e2e_rate", 0) / 1e6, 2) for x in per_node])  # fmt: skip
    broker.delete(name)
    return res


def rows(keys: list[str], args) -> list[tuple[str, str, int]]:
    """(workload, layout, body) of every row, in the order they run."""
    return [(k, layout, body) for body in args.bodies for layout in args.layouts for k in keys]


def row_key(row: tuple[str, str, int]) -> str:
    return "/".join(str(x) for x in row)


def run_broker(broker, keys: list[str], args) -> dict:
    out: dict = {}
    try:
        broker.start()
    except Exception as e:  # noqa: BLE001
        print(f"[bench] {broker.label} did not start: {e}", file=sys.stderr)
        broker.stop()
        return {row_key(r): {"error": f"{broker.label} did not start: {str(e)[:300]}"} for r in rows(keys, args)}
    try:
        if args.warmup > 0:
            print(f"[bench] {broker.key}: warm-up ({args.warmup} msgs on a 3-replica queue)", file=sys.stderr)
            try:
                broker.declare("bench-warmup", 3)
                broker.wait_queue("bench-warmup")
                run_pair_split(host="127.0.0.1", pub_port=broker.amqp_port(0), con_port=broker.amqp_port(1),
                               address=broker.address("bench-warmup"), count=args.warmup, body=args.bodies[0],
                               credit=args.credit, window=args.window, durable=True,
                               idle_timeout=args.idle_timeout, arrow=args.arrow)  # fmt: skip
                broker.delete("bench-warmup")
                time.sleep(2)
            except Exception as e:  # noqa: BLE001
                print(f"[bench] warm-up failed: {e}", file=sys.stderr)
        for row in rows(keys, args):
            key, layout, body = row
            _, replicas = WORKLOADS[key]
            runs = []
            for i in range(args.repeat):
                try:
                    r = run_workload(broker, key, replicas, args, f"r{i + 1}", layout, body)
                except Exception as e:  # noqa: BLE001
                    r = {"ok": False, "error": f"{type(e).__name__}: {e}"}
                short = {k: r.get(k) for k in ("e2e_rate", "sender_rate", "receiver_rate", "lat_ms", "ok",
                                               "leaders_seen", "load_before", "wall_s",
                                               "cpu_us_per_msg", "node_cpu_us_per_msg",
                                               "node_cpu_share")}  # fmt: skip
                print(f"[bench]   -> {json.dumps(short)}" + (f" error: {r['error'][:500]}" if "error" in r else ""),
                      file=sys.stderr)
                runs.append(r)
            good = sorted((r for r in runs if r.get("ok")), key=lambda r: r["e2e_rate"])
            if good:
                best = dict(good[(len(good) - 1) // 2])
                best["runs"] = runs
                best["e2e_rates"] = [r.get("e2e_rate") for r in runs]
                if len(good) > 1:
                    best["e2e_median"] = statistics.median(r["e2e_rate"] for r in good)
                out[row_key(row)] = best
            else:
                out[row_key(row)] = {"error": runs[-1].get("error", "failed"), "runs": runs}
    finally:
        broker.stop()
    return out


# --------------------------------------------------------------------------- report
def cell(r: dict | None) -> str:
    if r is None:
        return "not run"
    if not r.get("ok"):
        return "failed"
    lat = r.get("lat_ms") or {}
    runs = ", ".join(f"{x:,}" for x in r.get("e2e_rates") or [] if x)
    cpu = [x.get("cpu_us_per_msg") for x in r.get("runs") or [r] if x.get("ok")]
    cpu_s = "-".join(f"{x:.0f}" for x in sorted({round(x) for x in cpu if x is not None}))
    return (f"{r['e2e_rate']:,} msg/s" + (f" ({runs})" if runs else "")
            + f", {lat.get('p50', 0) / 1000:.2f} / {lat.get('p99', 0) / 1000:.2f} s"
            + (f", {cpu_s} µs CPU/msg" if cpu_s else ""))  # fmt: skip


def ratio(w: dict | None, rb: dict | None) -> str:
    if not w or not rb or not w.get("ok") or not rb.get("ok") or not rb.get("e2e_rate"):
        return "—"
    p99 = (w.get("lat_ms") or {}).get("p99"), (rb.get("lat_ms") or {}).get("p99")
    return f"{w['e2e_rate'] / rb['e2e_rate']:.2f}×" + (f", p99 {p99[0] / p99[1]:.2f}×" if all(p99) else "")


def load_cell(r: dict | None) -> str:
    if not r or "load_before" not in r:
        return "—"
    return f"{r['load_before'][0]:.1f} / {r['cpu_idle_before']:.0%}"


CONSUMER = {"pub-leader": "consumer on a follower", "pub-follower": "consumer on the leader",
            "split": "publisher and consumer on followers", "same": "both on the leader"}  # fmt: skip


def row_label(row: tuple[str, str, int]) -> str:
    key, layout, body = row
    where = CONSUMER[layout]
    if WORKLOADS[key][1] == 1 and layout in ("pub-leader", "split"):
        where = where.replace("a follower", "a node without replica").replace("followers", "nodes without replica")
    return f"{WORKLOADS[key][0]}, {body} B, {where}"


def table(results: dict, row_list: list[tuple[str, str, int]], labels: dict) -> str:
    """One line per row: each broker's rate (runs), p50/p99, CPU per message, and each Warren / RabbitMQ."""
    brokers = list(results)
    head = ["workload", *(f"{labels.get(b, b)}: rate (runs), p50 / p99, CPU" for b in brokers)]
    warrens = [b for b in brokers if b != "rabbitmq"]
    if "rabbitmq" in results:
        head += [f"{labels.get(b, b)} / RabbitMQ" for b in warrens]
    head.append("load avg / CPU idle before (" + "; ".join(labels.get(b, b) for b in brokers) + ")")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in row_list:
        k = row_key(row)
        cells = [row_label(row), *(cell(results[b].get(k)) for b in brokers)]
        if "rabbitmq" in results:
            cells += [ratio(results[b].get(k), results["rabbitmq"].get(k)) for b in warrens]
        cells.append("; ".join(load_cell(results[b].get(k)) for b in brokers))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def print_profiles(profile_dir: str, top: int) -> None:
    import pstats

    for name in sorted(os.listdir(profile_dir)):
        if not name.endswith(".prof") or "-warmup" in name:
            continue
        path = os.path.join(profile_dir, name)
        print(f"\n### {name}: top {top} by own time (tottime)\n")
        st = pstats.Stats(path)
        st.sort_stats("tottime").print_stats(top)
        print(f"\n### {name}: top {top} by cumulative time\n")
        st.sort_stats("cumulative").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_profiled_node"]:
        return profiled_node(argv[1:])
    ap = argparse.ArgumentParser(description="Quorum queues: 3-node Warren vs 3-node RabbitMQ 3.10 (arrow pairs).")
    ap.add_argument("--brokers", default="rabbitmq,warren",
                    help="comma list of: warren, rabbitmq, warren-base (run in this order)")
    ap.add_argument("--base-repo", metavar="DIR",
                    help="warren-base runs the Warren of this checkout (e.g. `git worktree add DIR <commit>`): "
                         "before and after side by side in one run")
    ap.add_argument("--workloads", default="qq3,qq1", help="comma list of: " + ", ".join(WORKLOADS))
    ap.add_argument("--layout", "--layouts", dest="layouts", default="pub-leader",
                    help="comma list of: " + ", ".join(LAYOUTS) + " (every workload runs in each)")
    ap.add_argument("--body", "--bodies", dest="bodies", default="12", help="comma list of body sizes in bytes")
    ap.add_argument("--count", type=int, default=50_000)
    ap.add_argument("--credit", type=int, default=1000)
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=2000)
    ap.add_argument("--idle-timeout", type=float, default=30.0)
    ap.add_argument("--wait-idle", type=float, default=0.0)
    ap.add_argument("--min-idle", type=float, default=0.9)
    ap.add_argument("--arrow", default=pair.DEFAULT_ARROW)
    ap.add_argument("--rabbit-amqp-base", type=int, default=5781, help="RabbitMQ node i: AMQP port base+i")
    ap.add_argument("--rabbit-mgmt-base", type=int, default=15781)
    ap.add_argument("--rabbit-dist-base", type=int, default=25781)
    ap.add_argument("--profile", metavar="DIR",
                    help="profile every Warren node's event loop during each measured run (cProfile), "
                         "files DIR/node<i>-<workload>-r<N>.prof")
    ap.add_argument("--profile-clock", choices=("cpu", "wall"), default="wall",
                    help="wall (default, the cheaper): elapsed time, waits included; cpu: the loop thread's "
                         "CPU time (time.thread_time: a system call per event, slows the node down a lot)")
    ap.add_argument("--profile-top", type=int, default=30)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", help="write all raw results here")
    args = ap.parse_args(argv)

    procs.install_handlers()
    if not os.access(args.arrow, os.X_OK):
        print(f"arrow not found at {args.arrow}: run bench/setup.sh", file=sys.stderr)
        return 2
    args.layouts = [x.strip() for x in args.layouts.split(",") if x.strip()]
    args.bodies = [int(x) for x in args.bodies.split(",") if x.strip()]
    for layout in args.layouts:
        if layout not in LAYOUTS:
            ap.error(f"unknown layout {layout!r}")
    keys = [k.strip() for k in args.workloads.split(",") if k.strip()]
    for k in keys:
        if k not in WORKLOADS:
            ap.error(f"unknown workload {k!r}")
    brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    results: dict = {}
    labels: dict = {}
    try:
        for b in brokers:
            if b == "warren":
                broker: Any = WarrenCluster(keep=args.keep, profile_dir=args.profile, profile_clock=args.profile_clock)
            elif b == "warren-base":
                if not args.base_repo:
                    ap.error("warren-base needs --base-repo")
                broker = WarrenCluster(keep=args.keep, repo=args.base_repo, key="warren-base",
                                       label=f"Warren base ({os.path.basename(args.base_repo.rstrip('/'))})")
            elif b == "rabbitmq":
                broker = RabbitCluster(amqp_base=args.rabbit_amqp_base, mgmt_base=args.rabbit_mgmt_base,
                                       dist_base=args.rabbit_dist_base, keep=args.keep)  # fmt: skip
            else:
                ap.error(f"unknown broker {b!r}")
            results[b] = run_broker(broker, keys, args)
            labels[b] = broker.label
    except KeyboardInterrupt:
        procs.cleanup_all()
        return 130

    print(table(results, rows(keys, args), labels))
    print()
    print(f"- arrow pair, 1 sender + 1 receiver, {args.count:,} durable messages per run, credit "
          f"{args.credit}, window {args.window}; median of {args.repeat} run(s) (every run in brackets); "
          "CPU = user + system of every broker process, per message (the range over the runs).")
    for b, per in results.items():
        for row in rows(keys, args):
            k = row_key(row)
            r = per.get(k) or {}
            if r.get("ok"):
                print(f"- {b} {k}: leader n{r['leader']}, members {r['members']}, publisher on n{r['publisher']}, "
                      f"consumer on n{r['consumer']}; sender {r['sender_rate']:,} msg/s, receiver "
                      f"{r['receiver_rate']:,} msg/s; load avg before {r['load_before']}, after {r['load_after']}; "
                      f"leaders seen during the run: {r['leaders_seen']}; all runs: {r.get('e2e_rates')}")
            elif r:
                print(f"- {b} {k}: FAILED: {' '.join(str(r.get('error')).split())[:400]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "host": platform.node(), "cpus": os.cpu_count(), "results": results,
                       "labels": labels, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, f, indent=1, default=str)
    if args.profile and "warren" in brokers:
        print_profiles(args.profile, args.profile_top)
    failed = any(not r.get("ok") for per in results.values() for r in per.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
