#!/usr/bin/env python3
"""200 quorum queues on a 3-node Warren cluster: CPU and memory at rest and under a light load.

Starts three ``warren server`` processes as one cluster (bench/quorum.py's
WarrenCluster), enables quorum_queue_v1 and measures, per node, CPU % (psutil:
user + system time of the server process over the window) and RSS:

1. ``empty``: the cluster with no queue, at rest (``--window`` s, default 30);
2. ``rest``: after declaring ``--queues`` quorum queues (default 200) of
   ``--replicas`` replicas (default 3), declared round robin through the
   three nodes (the declaring node is a queue's first leader), at rest;
3. ``load``: a light load from a python-qpid-proton process (this script's
   ``loadgen`` subcommand): ``--rate`` msg/s in all (default 500) spread
   round robin over the first ``--load-queues`` queues (default 20), durable
   12 B messages, queue i published through node i % 3 and consumed (credit
   100, auto-accept) on node (i + 1) % 3; after ``--load-warmup`` s the window
   is measured.

Between the phases it reads, from every node, the metadata group's term and
leader (GET /api/cluster) and every queue's leader (GET /api/queues): a term
that moved, or a queue whose leader changed, means an election happened.
(A queue without a leader shows its first member as leader, and there is no
per-queue term in the API, so an election won again by the same node goes
unseen.)

    .venv/bin/python bench/quorum_many.py                  # 200 queues, 30 s windows
    .venv/bin/python bench/quorum_many.py --queues 50 --window 10 --rate 200 --json /tmp/qqmany.json
    .venv/bin/python bench/quorum_many.py --profile /tmp/qqmany-prof   # where the nodes' time goes
    .venv/bin/python bench/quorum_many.py --broker rabbitmq    # the same on 3 RabbitMQ 3.10 nodes (a control)

``--profile DIR`` profiles each node's event loop with cProfile during each window
(bench/quorum.py's ``profiled_node``; ``--profile-clock cpu`` counts CPU time only, at a high cost).
With ``--broker rabbitmq`` the CPU and RSS are those of each node's whole process
tree (beam.smp and its helpers) and there is no metadata term (3.10 keeps its
metadata in Mnesia); the queue leaders are compared the same way.

Prints a markdown table (phase x node) and notes; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import procs  # noqa: E402
from clusters import RabbitCluster, WarrenCluster, load_avg  # noqa: E402
from quorum import print_profiles  # noqa: E402
from run import cpu_idle  # noqa: E402


# --------------------------------------------------------------------------- load generator (subprocess)
def loadgen(argv: list[str]) -> int:
    """Publishes `rate` msg/s round robin over `queues` (queue i through pub_ports[i % n]),
    consumes them on con_ports[(i + 1) % n]; prints a JSON summary after `duration` s."""
    from proton import Message
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    ap = argparse.ArgumentParser(prog="quorum_many.py loadgen")
    ap.add_argument("--ports", required=True, help="AMQP ports of the nodes, comma list")
    ap.add_argument("--queues", required=True, help="comma list of queue names")
    ap.add_argument("--rate", type=float, default=500)
    ap.add_argument("--duration", type=float, default=40)
    ap.add_argument("--body", type=int, default=12)
    ap.add_argument("--credit", type=int, default=100)
    ap.add_argument("--prefix", default="/queues/", help="address of queue Q: prefix + Q")
    args = ap.parse_args(argv)
    ports = [int(p) for p in args.ports.split(",")]
    queues = args.queues.split(",")
    n = len(ports)

    class Load(MessagingHandler):
        def __init__(self) -> None:
            super().__init__(prefetch=args.credit, auto_accept=True)
            self.senders: list[Any] = []
            self.sent = self.accepted = self.other = self.received = self.blocked = 0
            self.lat: list[float] = []
            self.outcomes: set = set()
            self.next_q = 0
            self.t0 = 0.0
            self.due = 0.0
            self.pad = b"x" * max(0, args.body - 8)

        def on_start(self, event: Any) -> None:
            c = event.container
            pub = [c.connect(f"amqp://guest:guest@127.0.0.1:{p}") for p in ports]
            con = [c.connect(f"amqp://guest:guest@127.0.0.1:{p}") for p in ports]
            for i, q in enumerate(queues):
                self.senders.append(c.create_sender(pub[i % n], args.prefix + q))
                c.create_receiver(con[(i + 1) % n], args.prefix + q)
            self.conns = pub + con
            self.t0 = time.monotonic()
            c.schedule(1.0, self)  # attach first
            self.started = False

        def on_timer_task(self, event: Any) -> None:
            now = time.monotonic()
            if not self.started:
                self.started, self.t_start, self.due = True, now, 0.0
            elapsed = now - self.t_start
            if elapsed >= args.duration:
                for conn in self.conns:
                    conn.close()
                return
            target = int(elapsed * args.rate)
            while self.sent < target:
                for _ in range(len(self.senders)):
                    s = self.senders[self.next_q]
                    self.next_q = (self.next_q + 1) % len(self.senders)
                    if s.credit > 0:
                        break
                else:  # no sender has credit: the brokers push back
                    self.blocked += 1
                    break
                body = time.time_ns().to_bytes(8, "big") + self.pad
                s.send(Message(body=body, durable=True))
                self.sent += 1
            event.container.schedule(0.01, self)

        def _first_outcome(self, event: Any) -> bool:
            # a delivery can be updated more than once (state, then settlement): count it once
            key = (event.link.name, event.delivery.tag)
            if key in self.outcomes:
                return False
            self.outcomes.add(key)
            return True

        def on_accepted(self, event: Any) -> None:
            if self._first_outcome(event):
                self.accepted += 1

        def on_rejected(self, event: Any) -> None:
            if self._first_outcome(event):
                self.other += 1

        def on_released(self, event: Any) -> None:
            if self._first_outcome(event):
                self.other += 1

        def on_message(self, event: Any) -> None:
            self.received += 1
            body = event.message.body
            if isinstance(body, (bytes, memoryview)) and len(body) >= 8:
                self.lat.append((time.time_ns() - int.from_bytes(bytes(body[:8]), "big")) / 1e6)

    h = Load()
    Container(h).run()
    lat = sorted(h.lat)

    def pct(p: float) -> float:
        return round(lat[min(len(lat) - 1, int(p * len(lat)))], 2) if lat else 0.0

    print(json.dumps({"sent": h.sent, "accepted": h.accepted, "released_or_rejected": h.other,
                      "received": h.received, "blocked_ticks": h.blocked, "rate": args.rate, "duration": args.duration,
                      "lat_ms": {"p50": pct(0.5), "p99": pct(0.99), "max": lat[-1] if lat else 0.0}}))  # fmt: skip
    return 0


# --------------------------------------------------------------------------- measuring
class NodeSampler:
    """CPU % (user+system over the window) and RSS (sampled each second) of the node processes."""

    def __init__(self, trees: list[list[int]], extra: dict[str, int] | None = None, loop_wait: bool = True):
        self.loop_wait = loop_wait  # the first pid of a tree runs the node's event loop in its main thread
        self.procs = [[psutil.Process(p) for p in tree] for tree in trees]
        self.extra = {k: [psutil.Process(p)] for k, p in (extra or {}).items()}

    def measure(self, seconds: float) -> dict:
        every = list(self.procs) + list(self.extra.values())  # each: the processes of one node
        t0 = time.monotonic()
        c0 = [self._cpu(p) for p in every]
        w0 = [self._run_delay(tree[0].pid) if self.loop_wait else None for tree in self.procs]
        sys0 = psutil.cpu_times()
        rss_max = [0] * len(every)
        rss_sum = [0] * len(every)
        samples = 0
        while time.monotonic() - t0 < seconds:
            time.sleep(min(1.0, max(0.0, seconds - (time.monotonic() - t0))))
            samples += 1
            for i, tree in enumerate(every):
                rss = 0
                for p in tree:
                    try:
                        rss += p.memory_info().rss
                    except psutil.Error:
                        pass
                rss_max[i] = max(rss_max[i], rss)
                rss_sum[i] += rss
        dt = time.monotonic() - t0
        c1 = [self._cpu(p) for p in every]
        w1 = [self._run_delay(tree[0].pid) if self.loop_wait else None for tree in self.procs]
        sys1 = psutil.cpu_times()
        busy = (sum(sys1) - sys1.idle - sys1.iowait) - (sum(sys0) - sys0.idle - sys0.iowait)
        total = sum(sys1) - sum(sys0)
        out: dict = {"seconds": round(dt, 1), "machine_busy": round(busy / total, 3) if total else None,
                     "nodes": [], "extra": {}}  # fmt: skip
        for i in range(len(every)):
            row = {"cpu_pct": round(100 * (c1[i] - c0[i]) / dt, 1), "rss_mib": round(rss_sum[i] / samples / 2**20, 1),
                   "rss_max_mib": round(rss_max[i] / 2**20, 1)}  # fmt: skip
            if i < len(self.procs):
                if w0[i] is not None and w1[i] is not None:
                    row["main_thread_runq_wait_pct"] = round(100 * (w1[i] - w0[i]) / 1e9 / dt, 1)
                out["nodes"].append(row)
            else:
                out["extra"][list(self.extra)[i - len(self.procs)]] = row
        return out

    @staticmethod
    def _run_delay(pid: int) -> int | None:
        """Nanoseconds the process's main thread (the event loop) has spent runnable but waiting
        for a CPU (/proc/PID/task/PID/schedstat, second field)."""
        try:
            with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
                return int(f.read().split()[1])
        except (OSError, ValueError, IndexError):
            return None

    @staticmethod
    def _cpu(tree: list[psutil.Process]) -> float:
        total = 0.0
        for p in tree:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        return total


class HttpProbe:
    """GET /api/cluster on every node `hz` times a second in threads: the answer time is
    a proxy for how long the node's event loop stalls (an election timeout is 0.5-1.0 s)."""

    def __init__(self, w: Any, hz: float):
        self.w, self.hz = w, hz
        self.lat: list[list[float]] = [[] for _ in range(w.n)]
        self.failed = [0] * w.n
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(w.n)]

    def _run(self, i: int) -> None:
        while not self._stop.wait(1.0 / self.hz):
            t0 = time.monotonic()
            try:
                self.w.http_get(i, self.w.probe_path, timeout=10)
                self.lat[i].append(time.monotonic() - t0)
            except Exception:  # noqa: BLE001
                self.failed[i] += 1

    def __enter__(self) -> HttpProbe:
        if self.hz > 0:
            for t in self._threads:
                t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self.hz > 0:
            for t in self._threads:
                t.join(15)

    def summary(self) -> list[dict]:
        out = []
        for i, lat in enumerate(self.lat):
            xs = sorted(lat)
            if not xs:
                out.append({"n": 0, "failed": self.failed[i]})
                continue
            out.append({"n": len(xs), "p50_ms": round(1000 * xs[len(xs) // 2]), "max_ms": round(1000 * xs[-1]),
                        "over_500ms": sum(1 for x in xs if x > 0.5), "failed": self.failed[i]})  # fmt: skip
        return out


def metadata_elections(w: Any) -> list[int]:
    """Per node, how many 'metadata group: term N, leader X' lines its log has (one per term/leader change)."""
    out = []
    for path in w.log_paths():
        try:
            text = path.read_text(errors="replace")
        except OSError:
            text = ""
        out.append(text.count("metadata group: term"))
    return out


def snapshot(w: Any, prefix: str) -> dict:
    """Every node's metadata term/leader and its view of every `prefix` queue's leader."""
    out: dict = {"metadata": [], "leaders": []}
    for i in range(w.n):
        st = w.metadata(i) or {}
        out["metadata"].append({"term": st.get("term"), "leader": st.get("leader"), "role": st.get("role")})
        try:
            qs = w.list_queues(i)
        except Exception as e:  # noqa: BLE001
            print(f"[bench] GET /api/queues on n{i}: {e}", file=sys.stderr)
            qs = []
        out["leaders"].append({q["name"]: q.get("leader") for q in qs if q["name"].startswith(prefix)})
    return out


def compare(a: dict, b: dict, w: Any) -> dict:
    terms_a = [m["term"] for m in a["metadata"]]
    terms_b = [m["term"] for m in b["metadata"]]
    changed: set[str] = set()
    for i in range(w.n):
        for name, leader in b["leaders"][i].items():
            before = a["leaders"][i].get(name)
            if before is not None and leader != before:
                changed.add(name)
    missing = sum(1 for i in range(w.n) for name in a["leaders"][i] if name not in b["leaders"][i])
    return {"terms_before": terms_a, "terms_after": terms_b, "metadata_term_moved": terms_a != terms_b,
            "metadata_leader_before": a["metadata"][0]["leader"], "metadata_leader_after": b["metadata"][0]["leader"],
            "queues_leader_changed": sorted(changed), "queues_missing": missing}  # fmt: skip


def leader_spread(snap: dict, w: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for leader in snap["leaders"][0].values():
        key = f"n{w.index_of(leader)}" if leader else "none"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


declare_refusals: list[str] = []  # declarations that failed and were retried


def declare_all(w: Any, names: list[str], replicas: int) -> float:
    t0 = time.monotonic()
    errors: list[str] = []
    lock = threading.Lock()
    todo = list(enumerate(names))
    refused = declare_refusals

    def worker() -> None:
        while True:
            with lock:
                if not todo:
                    return
                i, name = todo.pop(0)
            for attempt in range(10):
                try:
                    w.declare(name, replicas, via=i % w.n)
                    break
                except Exception as e:  # noqa: BLE001 - a declaration is idempotent: try again
                    with lock:
                        refused.append(f"{name}: {e}")
                    if attempt == 9:
                        errors.append(f"{name}: {e}")
                    time.sleep(2)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} declarations failed, e.g. {errors[:3]}")
    return time.monotonic() - t0


def wait_all_known(w: Any, names: list[str], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    want = set(names)
    while True:
        ok = True
        for i in range(w.n):
            try:
                qs = w.list_queues(i)
            except Exception:  # noqa: BLE001
                ok = False
                break
            if not want <= {q["name"] for q in qs}:
                ok = False
                break
        if ok:
            return
        if time.monotonic() > deadline:
            raise RuntimeError("not every node knows every queue")
        time.sleep(1)


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["loadgen"]:
        return loadgen(argv[1:])
    ap = argparse.ArgumentParser(description="200 quorum queues on 3 Warren nodes: CPU/RSS at rest and under load.")
    ap.add_argument("--broker", choices=("warren", "rabbitmq"), default="warren",
                    help="rabbitmq: the same on a 3-node RabbitMQ 3.10 cluster (bench/quorum.py's), as a control")
    ap.add_argument("--warren-repo", metavar="DIR",
                    help="run the Warren of this checkout instead (e.g. the commit before a change, for a before/after)")
    ap.add_argument("--rabbit-amqp-base", type=int, default=5781)
    ap.add_argument("--rabbit-mgmt-base", type=int, default=15781)
    ap.add_argument("--rabbit-dist-base", type=int, default=25781)
    ap.add_argument("--queues", type=int, default=200)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--window", type=float, default=30.0, help="seconds per measured window")
    ap.add_argument("--settle", type=float, default=15.0, help="seconds after declaring before measuring")
    ap.add_argument("--load-queues", type=int, default=20)
    ap.add_argument("--rate", type=float, default=500.0, help="msg/s in all over the loaded queues")
    ap.add_argument("--load-warmup", type=float, default=5.0)
    ap.add_argument("--probe-hz", type=float, default=2.0,
                    help="GET /api/cluster per node per second during the windows (0: none)")
    ap.add_argument("--no-empty", action="store_true", help="skip the empty-cluster window")
    ap.add_argument("--profile", metavar="DIR",
                    help="profile every node's event loop (cProfile) in each window: DIR/node<i>-<phase>.prof")
    ap.add_argument("--profile-clock", choices=("cpu", "wall"), default="wall",
                    help="wall (default, the cheaper): elapsed time, waits included; cpu: the loop thread's "
                         "CPU time (time.thread_time: a system call per event, slows the node down a lot)")
    ap.add_argument("--profile-top", type=int, default=25)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--report", metavar="JSON", help="print the report of an earlier run's --json file, run nothing")
    args = ap.parse_args(argv)
    if args.report:
        with open(args.report) as f:
            res = json.load(f)
        print(report(res, argparse.Namespace(**res["args"])))
        return 0

    procs.install_handlers()
    if args.broker == "warren":
        w: Any = WarrenCluster(keep=args.keep, profile_dir=args.profile, profile_clock=args.profile_clock,
                               repo=args.warren_repo)  # fmt: skip
    else:
        w = RabbitCluster(amqp_base=args.rabbit_amqp_base, mgmt_base=args.rabbit_mgmt_base,
                          dist_base=args.rabbit_dist_base, keep=args.keep)  # fmt: skip
    res: dict = {"args": vars(args), "phases": {}, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    prefix = "qqmany-"
    names = [f"{prefix}{i:03d}" for i in range(args.queues)]
    try:
        w.start()
        res["broker"] = w.label
        pids = w.process_trees()
        loop_wait = args.broker == "warren"  # RabbitMQ's first pid is its start script
        sampler = NodeSampler(pids, loop_wait=loop_wait)

        def phase(key: str, extra: dict[str, int] | None = None) -> dict:
            load0, idle0 = load_avg(), cpu_idle()
            s = NodeSampler(pids, extra, loop_wait=loop_wait) if extra else sampler
            print(f"[bench] {key}: measuring {args.window:.0f} s; load {load0}, CPU idle {idle0:.0%}", file=sys.stderr)
            w.profile_start(key)
            with HttpProbe(w, args.probe_hz) as probe:
                m = s.measure(args.window)
            w.profile_stop()
            m["http_probe"] = probe.summary()
            m.update(load_before=load0, load_after=load_avg(), cpu_idle_before=round(idle0, 3))
            print(f"[bench] {key}: {json.dumps(m)}", file=sys.stderr)
            res["phases"][key] = m
            return m

        if not args.no_empty:
            time.sleep(3)
            phase("empty")
        s_empty = snapshot(w, prefix)
        t_decl = declare_all(w, names, args.replicas)
        wait_all_known(w, names)
        res["declare_seconds"] = round(t_decl, 1)
        res["declare_refused"] = len(declare_refusals)
        res["declare_refused_examples"] = declare_refusals[:5]
        print(f"[bench] declared {args.queues} quorum queues in {t_decl:.1f} s; settling {args.settle:.0f} s",
              file=sys.stderr)
        time.sleep(args.settle)
        s0 = snapshot(w, prefix)
        res["metadata_during_declare"] = compare(s_empty, s0, w)
        res["leaders_start"] = leader_spread(s0, w)
        disagree = [n for n in names if len({s0["leaders"][i].get(n) for i in range(w.n)}) != 1]
        res["leaders_disagree_start"] = disagree
        phase("rest")
        s1 = snapshot(w, prefix)
        res["election_rest"] = compare(s0, s1, w)

        loaded = names[: args.load_queues]
        ports = ",".join(str(w.amqp_port(i)) for i in range(w.n))
        duration = args.load_warmup + args.window + 2
        cmd = [sys.executable, os.path.abspath(__file__), "loadgen", "--ports", ports, "--queues", ",".join(loaded),
               "--prefix", w.address(""),
               "--rate", str(args.rate), "--duration", str(duration)]  # fmt: skip
        gen = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        try:
            time.sleep(1.0 + args.load_warmup)
            phase("load", {"loadgen": gen.pid})
            out, _ = gen.communicate(timeout=duration + 60)
        finally:
            if gen.poll() is None:
                gen.kill()
                gen.wait()
        try:
            res["loadgen"] = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            res["loadgen"] = {"error": out[-500:] if out else "no output"}
        print(f"[bench] loadgen: {json.dumps(res['loadgen'])}", file=sys.stderr)
        time.sleep(2)
        s2 = snapshot(w, prefix)
        res["election_load"] = compare(s1, s2, w)
        res["leaders_end"] = leader_spread(s2, w)
        res["ids"] = w.node_ids()
        res["metadata_leader_log_lines"] = metadata_elections(w)
    except KeyboardInterrupt:
        w.stop()
        return 130
    finally:
        w.stop()

    print(report(res, args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1, default=str)
    if args.profile:
        print_profiles(args.profile, args.profile_top)
    return 0


def cpu_per_message(res: dict) -> dict | None:
    """µs of CPU per message sent in the load window, per node: all of it, and over the rest window's."""
    lg, phases = res.get("loadgen") or {}, res.get("phases") or {}
    if not lg.get("sent") or "load" not in phases:
        return None
    rate, load = lg["sent"] / lg["duration"], [r["cpu_pct"] for r in phases["load"]["nodes"]]
    rest = [r["cpu_pct"] for r in phases["rest"]["nodes"]] if "rest" in phases else [0.0] * len(load)
    per_node = [pct / 100 * 1e6 / rate for pct in load]
    return {"rate": rate, "per_node": per_node, "all": sum(per_node),
            "over_rest": [(a - b) / 100 * 1e6 / rate for a, b in zip(load, rest, strict=True)]}  # fmt: skip


def report(res: dict, args) -> str:
    lines = [f"{res.get('broker', '')}:", "", "| phase | node | CPU % | main thread waiting for a CPU % "
             "| RSS MiB (mean / max) | HTTP answer p50 / max ms (> 0.5 s) | load avg before, machine busy |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    labels = {"empty": "empty cluster, at rest", "rest": f"{args.queues} quorum queues, at rest",
              "load": f"{args.queues} queues, {args.rate:.0f} msg/s over {args.load_queues}"}  # fmt: skip
    for key in ("empty", "rest", "load"):
        m = res["phases"].get(key)
        if not m:
            continue
        for i, row in enumerate(m["nodes"]):
            ctx = f"{m['load_before'][0]:.1f}, {m['machine_busy']:.0%}" if i == 0 else ""
            pr = (m.get("http_probe") or [{}] * len(m["nodes"]))[i]
            probe = (f"{pr['p50_ms']} / {pr['max_ms']} ({pr['over_500ms']})" if pr.get("n") else "—") + (
                f", {pr['failed']} failed" if pr.get("failed") else "")
            wait = row.get("main_thread_runq_wait_pct")
            lines.append(f"| {labels[key] if i == 0 else ''} | n{i} | {row['cpu_pct']:.1f} "
                         f"| {'—' if wait is None else f'{wait:.1f}'} "
                         f"| {row['rss_mib']:.0f} / {row['rss_max_mib']:.0f} | {probe} | {ctx} |")  # fmt: skip
        total = sum(r["cpu_pct"] for r in m["nodes"])
        lines.append(f"| | all 3 | {total:.1f} | | {sum(r['rss_mib'] for r in m['nodes']):.0f} | | |")
        for k, row in m.get("extra", {}).items():
            lines.append(f"| | {k} | {row['cpu_pct']:.1f} | | {row['rss_mib']:.0f} | | |")
    lines.append("")
    lines.append(f"- {args.queues} quorum queues of {args.replicas} replicas declared in {res.get('declare_seconds')} s "
                 f"(round robin over the nodes, 3 at a time; {res.get('declare_refused', 0)} refusals retried, e.g. "
                 f"{[' '.join(x.split())[:160] for x in res.get('declare_refused_examples', [])[:1]]}); leaders after settling: {res.get('leaders_start')}, at the end: "
                 f"{res.get('leaders_end')}; queues whose leader the nodes disagreed on: "
                 f"{len(res.get('leaders_disagree_start', []))}.")  # fmt: skip
    for key, what in (("metadata_during_declare", "while declaring and settling"), ("election_rest", "at rest"),
                      ("election_load", "under load")):
        e = res.get(key)
        if e:
            meta = (f"metadata terms {e['terms_before']} -> {e['terms_after']} (moved: {e['metadata_term_moved']}), "
                    f"leader {e['metadata_leader_before']} -> {e['metadata_leader_after']}; "
                    if any(t is not None for t in e["terms_before"]) else "")
            lines.append(f"- {what}: {meta}queues whose leader changed: "
                         f"{len(e['queues_leader_changed'])} {e['queues_leader_changed'][:10]}; "
                         f"queues missing from a node's list: {e['queues_missing']}.")  # fmt: skip
    if res.get("metadata_leader_log_lines"):
        lines.append(f"- metadata leader/term changes logged per node over the whole run (1 = the first election "
                     f"only): {res['metadata_leader_log_lines']}.")
    lg = res.get("loadgen") or {}
    if "sent" in lg:
        lines.append(f"- load: {lg['sent']} sent, {lg['accepted']} accepted, {lg['released_or_rejected']} released or "
                     f"rejected, {lg['received']} received in {lg['duration']:.0f} s (target {lg['rate']:.0f} msg/s); "
                     f"latency p50 {lg['lat_ms']['p50']} ms, p99 {lg['lat_ms']['p99']} ms, max "
                     f"{lg['lat_ms']['max']:.0f} ms.")  # fmt: skip
        cpu = cpu_per_message(res)
        if cpu:
            lines.append(f"- CPU per message under the load ({cpu['rate']:.0f} msg/s sent), per node: "
                         + ", ".join(f"n{i} {x:.0f}" for i, x in enumerate(cpu["per_node"]))
                         + f" µs ({cpu['all']:.0f} µs for the cluster); over the 200 queues at rest: "
                         + ", ".join(f"n{i} {x:.0f}" for i, x in enumerate(cpu["over_rest"]))
                         + f" µs ({sum(cpu['over_rest']):.0f} µs).")  # fmt: skip
    elif lg:
        lines.append(f"- load generator failed: {lg}")
    lines.append("- CPU % = server process user+system time / window (100 % = one core); the machine has "
                 f"{os.cpu_count()} cores. Main thread waiting = share of the window the node's main thread "
                 "(Warren: the event loop) was runnable but had no CPU (/proc schedstat run delay).")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
