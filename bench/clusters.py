"""The clusters the quorum benchmarks run on: three `warren server` processes
(`WarrenCluster`, optionally under cProfile: `profiled_node`) or three RabbitMQ
3.10 nodes (`RabbitCluster`), with the helpers bench/quorum.py,
bench/quorum_deep.py and bench/quorum_many.py share."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "support"))
import procs  # noqa: E402
from cluster_procs import ClusterProcesses, HttpError  # noqa: E402
from rabbitmq import RabbitNode  # noqa: E402


def quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def trees_cpu_seconds(trees) -> list[float]:
    """User + system CPU so far of each process tree (a node's processes): per node, the
    busiest node shows which loop limits the rate (a Warren node runs one core)."""
    import psutil

    out = []
    for tree in trees:
        total = 0.0
        for pid in tree:
            try:
                t = psutil.Process(pid).cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
            except psutil.Error:
                pass
        out.append(total)
    return out


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# --------------------------------------------------------------------------- Warren
class ProcCluster(ClusterProcesses):
    """ClusterProcesses whose nodes go through bench/procs.py (own process
    group, stopped at exit and on signals), optionally under cProfile
    (see `profiled_node`: profiling runs between SIGUSR1 and SIGUSR2)."""

    def __init__(self, root: Path, n: int = 3, profile_dir: str | None = None, profile_clock: str = "wall",
                 extra_args: list[str] | None = None, repo: str | None = None,
                 env: dict[str, str] | None = None):  # fmt: skip
        # repo: the Warren checkout the nodes run (default: this one), e.g. an older commit to compare with;
        # env: variables for the nodes only (an allocator's settings, say)
        self.repo = os.path.abspath(repo or REPO)
        node_env = {**(env or {}), **({"PYTHONPATH": self.repo} if repo else {})}
        super().__init__(root, n, extra_args=extra_args, env=node_env or None)
        self.profile_dir = profile_dir
        self.profile_clock = profile_clock

    def spawn(self, i: int) -> None:
        node = self.nodes[i]
        prefix = [sys.executable]
        if self.profile_dir:
            prefix += [os.path.join(HERE, "quorum.py"), "_profiled_node", self.profile_clock,
                       os.path.join(self.profile_dir, f"node{i}")]  # fmt: skip
        else:
            prefix += ["-m", "node.cli"]
        cmd = [*prefix, "server", "--node-name", f"warren-{i}@localhost",
               "--data-dir", str(node.data_dir), "--listen-host", "127.0.0.1", "--amqp-port", str(node.amqp_port),
               "--http-port", str(node.http_port), "--metrics-port", "-1", "--grpc-port", str(node.grpc_port),
               "--cluster-secret", "warren-bench-secret", "--seeds", self.seeds, *self.extra_args]  # fmt: skip
        node.log_path.parent.mkdir(parents=True, exist_ok=True)
        node.proc = procs.spawn(cmd, env=self.env, log_path=str(node.log_path), cwd=self.repo)

    def close(self) -> None:
        # SIGTERM to every node first: a clean, parallel stop
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.proc.send_signal(signal.SIGTERM)
        for node in self.nodes:
            if node.proc is not None:
                procs.stop(node.proc, term_timeout=30.0)


def profiled_node(argv: list[str]) -> int:
    """`quorum.py _profiled_node cpu|wall OUT server ...`: runs `warren server ...` (node.cli) in
    this process; SIGUSR1 starts a fresh cProfile of the main thread (the event loop), SIGUSR2
    stops it and writes OUT-<phase>.prof, <phase> read from the file OUT.phase. Clock "cpu" is
    the main thread's CPU time (time.thread_time), "wall" is elapsed time (off-CPU waits such as
    fdatasync, and time spent waiting for a core, count)."""
    import cProfile

    clock, out, rest = argv[0], argv[1], argv[2:]
    state: dict[str, Any] = {"prof": None}

    def start(*_: Any) -> None:
        if state["prof"] is None:
            # the default timer is read in C (cheap); a Python timer costs a call per event
            state["prof"] = cProfile.Profile(time.thread_time) if clock == "cpu" else cProfile.Profile()
            state["prof"].enable()

    def stop(*_: Any) -> None:
        prof, state["prof"] = state["prof"], None
        if prof is not None:
            prof.disable()
            try:
                with open(out + ".phase") as f:
                    phase = f.read().strip() or "run"
            except OSError:
                phase = "run"
            prof.dump_stats(f"{out}-{phase}.prof.tmp")
            os.replace(f"{out}-{phase}.prof.tmp", f"{out}-{phase}.prof")

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.path.insert(0, os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] or REPO)
    sys.argv = ["warren", *rest]
    from node.cli import main as cli_main

    try:
        return cli_main(rest)
    finally:
        stop()


class WarrenCluster:
    def __init__(self, n: int = 3, keep: bool = False, profile_dir: str | None = None, profile_clock: str = "wall",
                 repo: str | None = None, key: str = "warren", label: str = "Warren",
                 env: dict[str, str] | None = None, extra_args: list[str] | None = None):  # fmt: skip
        self.n, self.keep, self.profile_dir, self.profile_clock = n, keep, profile_dir, profile_clock
        self.repo, self.key, self.label = repo, key, label  # repo: another checkout to run (see ProcCluster)
        self.env = env  # environment variables for the nodes only
        self.extra_args = extra_args  # the nodes' further options (`--workers 2`, say)
        self.base: str | None = None
        self.c: ProcCluster | None = None

    def start(self, timeout: float = 90.0) -> None:
        self.base = tempfile.mkdtemp(prefix="warren-bench-qq-")
        if self.profile_dir:
            os.makedirs(self.profile_dir, exist_ok=True)
        self.c = ProcCluster(Path(self.base), self.n, profile_dir=self.profile_dir, profile_clock=self.profile_clock,
                             repo=self.repo, env=self.env, extra_args=self.extra_args)  # fmt: skip
        t0 = time.monotonic()
        self.c.start(timeout)
        for node in self.c.nodes:  # HTTP up and every node following the same leader
            self.c.wait_for(lambda node=node: node.status() is not None, timeout, f"node {node.index} HTTP")
        self.enable_quorum()
        print(f"[bench] Warren cluster of {self.n} ready in {time.monotonic() - t0:.1f} s; dir {self.base}; "
              + ", ".join(f"n{n.index} amqp {n.amqp_port} http {n.http_port} id {n.id}" for n in self.c.nodes),
              file=sys.stderr)

    def enable_quorum(self) -> None:
        deadline = time.monotonic() + 30
        while True:
            try:
                self.c[0].http("PUT", "/api/feature_flags/quorum_queue_v1/enable", {}, timeout=20)
                return
            except (HttpError, OSError) as e:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"enabling quorum_queue_v1: {e}") from None
                time.sleep(0.5)

    def profile_start(self, phase: str) -> None:
        """Every node starts a fresh profile, to be written as node<i>-<phase>.prof (with --profile)."""
        if not self.profile_dir or self.c is None:
            return
        for node in self.c.nodes:
            with open(os.path.join(self.profile_dir, f"node{node.index}.phase"), "w") as f:
                f.write(phase)
            node.proc.send_signal(signal.SIGUSR1)

    def profile_stop(self) -> None:
        if not self.profile_dir or self.c is None:
            return
        for node in self.c.nodes:
            node.proc.send_signal(signal.SIGUSR2)
        time.sleep(2.0)  # dumping takes a moment

    def stop(self) -> None:
        if self.c is not None:
            self.c.close()
            self.c = None
        if self.base and not self.keep:
            shutil.rmtree(self.base, ignore_errors=True)
            self.base = None

    # -- per node
    def amqp_port(self, i: int) -> int:
        return self.c[i].amqp_port

    def node_ids(self) -> list[str]:
        return [n.id for n in self.c.nodes]

    def pids(self) -> list[int]:
        return [n.proc.pid for n in self.c.nodes]

    def metadata(self, i: int) -> dict | None:
        return self.c[i].status()

    probe_path = "/api/cluster"

    def http_get(self, i: int, path: str, timeout: float = 60.0) -> Any:
        return self.c[i].http("GET", path, timeout=timeout)

    def list_queues(self, i: int) -> list[dict]:
        return self.http_get(i, "/api/queues/%2F")

    def process_trees(self) -> list[list[int]]:
        """Per node, the pids whose CPU counts: the server process and its workers, if any."""
        import psutil

        return [[n.proc.pid, *(c.pid for c in psutil.Process(n.proc.pid).children())] for n in self.c.nodes]

    def log_paths(self) -> list[Path]:
        return [n.log_path for n in self.c.nodes]

    # -- queues
    def declare(self, name: str, replicas: int, via: int = 0) -> None:
        self.c[via].http("PUT", f"/api/queues/%2F/{quote(name)}",
                         {"durable": True, "arguments": {"x-queue-type": "quorum",
                                                         "x-quorum-initial-group-size": replicas}}, timeout=30)

    def info(self, name: str, via: int = 0) -> dict | None:
        try:
            return self.c[via].http("GET", f"/api/queues/%2F/{quote(name)}")
        except (HttpError, OSError):
            return None

    def wait_queue(self, name: str, timeout: float = 30.0) -> dict:
        """Until every node knows the queue and its replicas agree on a leader; returns node 0's view.
        (A node without a replica shows the queue without leader and members.)"""
        deadline = time.monotonic() + timeout
        while True:
            views = [self.info(name, i) for i in range(self.n)]
            if all(v is not None for v in views) and views[0].get("members"):
                members = views[0]["members"]
                leaders = {views[self.index_of(m)].get("leader") for m in members}
                if len(leaders) == 1 and next(iter(leaders)) in members:
                    return views[0]
            if time.monotonic() > deadline:
                raise RuntimeError(f"queue {name} not ready on every node: {views}")
            time.sleep(0.1)

    def delete(self, name: str) -> None:
        try:
            self.c[0].http("DELETE", f"/api/queues/%2F/{quote(name)}", timeout=30)
        except (HttpError, OSError) as e:
            print(f"[bench] could not delete {name}: {e}", file=sys.stderr)

    def consumers(self, name: str, via: int) -> int:
        v = self.info(name, via)
        return int(v.get("consumers", 0)) if v else 0

    @staticmethod
    def address(name: str) -> str:
        return f"/queues/{name}"

    def index_of(self, node_id: str) -> int:
        return next(n.index for n in self.c.nodes if node_id in (n.id, n.name))  # the API names nodes

    def version(self) -> str:
        return ""


# --------------------------------------------------------------------------- RabbitMQ
class ClusterRabbitNode(RabbitNode):
    """A RabbitNode whose HOME (its base dir) holds a given Erlang cookie, the same on every node."""

    def __init__(self, cookie: str, **kw: Any):
        super().__init__(**kw)
        self.cookie = cookie

    def _write_config(self) -> None:
        super()._write_config()
        path = os.path.join(self.base, ".erlang.cookie")
        with open(path, "w") as f:
            f.write(self.cookie)
        os.chmod(path, 0o400)


class RabbitCluster:
    key = "rabbitmq"
    label = "RabbitMQ 3.10"

    def __init__(self, n: int = 3, amqp_base: int = 5781, mgmt_base: int = 15781, dist_base: int = 25781,
                 keep: bool = False, name: str = "warren_qq"):  # fmt: skip
        # name, ports: another bench's cluster may run beside this one (node names must differ)
        self.n = n
        self.cookie = os.urandom(16).hex().upper()
        self.nodes = [ClusterRabbitNode(self.cookie, amqp_port=amqp_base + i, mgmt_port=mgmt_base + i,
                                        dist_port=dist_base + i, nodename=f"{name}{i + 1}@localhost", keep=keep)
                      for i in range(n)]  # fmt: skip
        self._version = ""

    def start(self, timeout: float = 180.0) -> None:
        t0 = time.monotonic()
        errors: list[BaseException] = []

        def boot(node: RabbitNode) -> None:
            try:
                node.start(timeout)
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        procs.install_handlers()  # signal handlers are set from the main thread only, not from boot()
        threads = [threading.Thread(target=boot, args=(node,)) for node in self.nodes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        first = self.nodes[0].nodename
        for node in self.nodes[1:]:
            node.ctl("stop_app")
            node.ctl("join_cluster", first)
            node.ctl("start_app")
            procs.wait_for(node._ready, 60, f"{node.nodename} after join_cluster", interval=0.3)
        procs.wait_for(self._clustered, 60, "a RabbitMQ cluster of 3 running nodes", interval=0.5)
        self._version = self.nodes[0].version()
        self.label = f"RabbitMQ {'.'.join(self._version.split('.')[:2])}"
        print(f"[bench] RabbitMQ {self._version} cluster of {self.n} ready in {time.monotonic() - t0:.1f} s: "
              + ", ".join(f"{n.nodename} amqp {n.amqp_port} mgmt {n.mgmt_port}" for n in self.nodes),
              file=sys.stderr)

    def _clustered(self) -> bool:
        try:
            nodes = self.nodes[0].api("GET", "/api/nodes")
        except Exception:  # noqa: BLE001
            return False
        return sum(1 for x in nodes if x.get("running")) == self.n

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def amqp_port(self, i: int) -> int:
        return self.nodes[i].amqp_port

    def node_ids(self) -> list[str]:
        return [n.nodename for n in self.nodes]

    def metadata(self, i: int) -> dict | None:
        return None  # 3.10 keeps its metadata in Mnesia: no Raft term to read

    probe_path = "/api/whoami"

    def http_get(self, i: int, path: str, timeout: float = 60.0) -> Any:
        return self.nodes[i].api("GET", path, timeout=timeout)

    def list_queues(self, i: int) -> list[dict]:
        return self.http_get(i, "/api/queues/%2F")

    def process_trees(self) -> list[list[int]]:
        """Per node, the pids whose CPU counts: the start script and everything under it (beam.smp,
        erl_child_setup, ...)."""
        import psutil

        out = []
        for n in self.nodes:
            p = psutil.Process(n.proc.pid)
            out.append([p.pid, *(c.pid for c in p.children(recursive=True))])
        return out

    def log_paths(self) -> list[Path]:
        return []

    def profile_start(self, phase: str) -> None:
        pass

    def profile_stop(self) -> None:
        pass

    def declare(self, name: str, replicas: int, via: int = 0) -> None:
        # x-queue-leader-locator defaults to client-local: the first leader is node `via`
        self.nodes[via].api("PUT", RabbitNode._q(name), {
            "durable": True, "auto_delete": False,
            "arguments": {"x-queue-type": "quorum", "x-quorum-initial-group-size": replicas}}, timeout=30)

    def info(self, name: str, via: int = 0) -> dict | None:
        try:
            return self.nodes[via].queue_info(name)
        except Exception:  # noqa: BLE001
            return None

    def wait_queue(self, name: str, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            v = self.info(name)
            if v and v.get("leader") and v.get("members"):
                return v
            if time.monotonic() > deadline:
                raise RuntimeError(f"queue {name} not ready: {v}")
            time.sleep(0.2)

    def delete(self, name: str) -> None:
        try:
            self.nodes[0].delete_queue(name)
        except Exception as e:  # noqa: BLE001
            print(f"[bench] could not delete {name}: {e}", file=sys.stderr)

    def consumers(self, name: str, via: int) -> int:
        v = self.info(name, via)
        return int(v.get("consumers", 0) or 0) if v else 0

    @staticmethod
    def address(name: str) -> str:
        return RabbitNode.address(name)

    def index_of(self, node_id: str) -> int:
        return next(i for i, n in enumerate(self.nodes) if n.nodename == node_id)

    def version(self) -> str:
        return self._version


# --------------------------------------------------------------------------- runs
def prime(broker, name: str, via: int = 0, timeout: float = 30.0) -> None:
    """One message through the queue (sent and consumed on node `via`): once it is
    confirmed the queue's Raft group has elected a leader, so the leader read
    afterwards is the elected one, not the placement's first member."""
    from proton import Message
    from proton.utils import BlockingConnection

    conn = BlockingConnection(f"amqp://guest:guest@127.0.0.1:{broker.amqp_port(via)}", timeout=timeout)
    try:
        conn.create_sender(broker.address(name)).send(Message(body="prime", durable=True))
        receiver = conn.create_receiver(broker.address(name), credit=1)
        receiver.receive(timeout=timeout)
        receiver.accept()
    finally:
        conn.close()
