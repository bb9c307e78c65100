"""`warren server` processes forming one cluster, driven over their HTTP API (see conftest.py)."""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from http_json import HttpError, request_json  # noqa: F401  (HttpError: callers catch it from here)

REPO = Path(__file__).resolve().parents[2]
SECRET = "warren-cluster-test-secret"
AUTH = "Basic " + base64.b64encode(b"guest:guest").decode()


def free_ports(n: int) -> list[int]:
    """n distinct free ports (held open together so that none repeats)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def http(port: int, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
    return request_json(f"http://127.0.0.1:{port}{path}", method, AUTH, body, timeout)


class Node:
    def __init__(self, index: int, data_dir: Path, amqp_port: int, http_port: int, grpc_port: int):
        self.index = index
        self.data_dir = data_dir
        self.amqp_port = amqp_port
        self.http_port = http_port
        self.grpc_port = grpc_port
        self.id = f"127.0.0.1:{grpc_port}"
        self.name = f"warren-{index}@localhost"  # its --node-name: how the HTTP API names it
        self.ids_by_name: dict[str, str] = {}  # every node of its cluster (ClusterProcesses sets it)
        self.log_path = data_dir.parent / f"n{index}.log"
        self.proc: subprocess.Popen | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pause(self) -> None:
        """SIGSTOP to the node's processes: the server and, with `--workers`, every worker."""
        self._signal_all(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal_all(signal.SIGCONT)

    def _signal_all(self, sig: int) -> None:
        import psutil

        for pid in [self.proc.pid, *(c.pid for c in psutil.Process(self.proc.pid).children(recursive=True))]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def http(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        return http(self.http_port, method, path, body, timeout)

    def by_address(self, queue: dict | None) -> dict | None:
        """A queue's JSON with its node, leader and members by cluster address (the HTTP API
        names them by node name once it knows them), as the tests compare them with `id`."""
        if queue is None:
            return None
        out = dict(queue)
        for key in ("node", "leader"):
            if isinstance(out.get(key), str):
                out[key] = self.ids_by_name.get(out[key], out[key])
        for key in ("members", "online"):
            if isinstance(out.get(key), list):
                out[key] = [self.ids_by_name.get(m, m) for m in out[key]]
        return out

    def status(self, timeout: float = 5.0) -> dict | None:
        """/api/cluster, or None when the node does not answer."""
        try:
            return self.http("GET", "/api/cluster", timeout=timeout)
        except (OSError, HttpError):
            return None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


class ClusterProcesses:
    """N `warren server` processes forming one cluster; see the module docstring."""

    def __init__(self, root: Path, n: int = 3, extra_args: list[str] | None = None,
                 env: dict[str, str] | None = None, seeded: bool = True) -> None:  # fmt: skip
        """`seeded`: every node gets the others as seeds; else each starts as a cluster of one."""
        ports = free_ports(3 * n)
        self.seeded = seeded
        self.nodes = [Node(i, root / f"n{i}", *ports[3 * i : 3 * i + 3]) for i in range(n)]
        for node in self.nodes:
            node.ids_by_name = {n.name: n.id for n in self.nodes}
        self.extra_args = list(extra_args or [])
        self.env = dict(os.environ, **(env or {}))
        self.node_env: dict[int, dict[str, str]] = {}  # extra environment of node i, read at each spawn
        # the checkout node i runs (another release's worktree, say), read at each spawn; default this one
        self.code_dir: dict[int, Path] = {}

    def __getitem__(self, i: int) -> Node:
        return self.nodes[i]

    def __len__(self) -> int:
        return len(self.nodes)

    @property
    def seeds(self) -> str:
        return ",".join(n.id for n in self.nodes)

    # -- processes -------------------------------------------------------------

    def spawn(self, i: int) -> None:
        node = self.nodes[i]
        assert not node.running, f"node {i} is already running"
        cmd = [sys.executable, "-m", "node.cli", "server", "--node-name", f"warren-{i}@localhost",
               "--data-dir", str(node.data_dir), "--listen-host", "127.0.0.1", "--amqp-port", str(node.amqp_port),
               "--http-port", str(node.http_port), "--metrics-port", "-1", "--grpc-port", str(node.grpc_port),
               "--cluster-secret", SECRET, "--enable-test-faults", *self.extra_args]  # fmt: skip
        if self.seeded:
            cmd += ["--seeds", self.seeds]
        node.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(node.log_path, "a")  # the child writes to it
        log.write(f"---- start {time.strftime('%H:%M:%S')}\n")
        log.flush()
        code = self.code_dir.get(i)
        where = {} if code is None else {"PYTHONPATH": str(code)}  # its packages, not this checkout's
        node.proc = subprocess.Popen(cmd, cwd=code or REPO, stdout=log, stderr=subprocess.STDOUT,
                                     env={**self.env, **where, **self.node_env.get(i, {})})
        log.close()

    def start(self, timeout: float = 30.0) -> float:
        """Start every node at once; returns the seconds until a leader was agreed on."""
        started = time.monotonic()
        for i in range(len(self.nodes)):
            self.spawn(i)
        self.wait_ready(timeout)
        return time.monotonic() - started

    def kill9(self, i: int) -> None:
        node = self.nodes[i]
        node.proc.send_signal(signal.SIGKILL)
        node.proc.wait(10)

    def stop(self, i: int) -> int:
        node = self.nodes[i]
        node.proc.send_signal(signal.SIGTERM)
        return node.proc.wait(20)

    def restart(self, i: int, timeout: float = 30.0) -> None:
        """Start node i again (after kill9 or stop) and wait until it follows the leader."""
        if self.nodes[i].running:
            self.stop(i)
        self.spawn(i)
        self.wait_ready(timeout)

    def close(self) -> None:
        for node in self.nodes:
            if node.running:
                node.proc.kill()
                node.proc.wait(10)

    # -- faults ----------------------------------------------------------------

    def partition(self, i: int) -> None:
        """Cut node i off from the others, both ways."""
        node = self.nodes[i]
        others = [n for n in self.nodes if n is not node]
        node.http("POST", "/api/cluster/test/partition", {"peers": [n.id for n in others]})
        for other in others:
            if other.running:
                other.http("POST", "/api/cluster/test/partition", {"peers": [node.id]})

    def heal(self) -> None:
        for node in self.nodes:
            if node.running:
                node.http("POST", "/api/cluster/test/heal", {})

    # -- views -----------------------------------------------------------------

    def statuses(self) -> dict[int, dict | None]:
        return {n.index: n.status() for n in self.nodes if n.running}

    def agreed_leader(self, among: list[int] | None = None) -> int | None:
        """Index of the leader every running node (or every node in `among`) names, once it leads."""
        statuses = self.statuses()
        if among is not None:
            statuses = {i: s for i, s in statuses.items() if i in among}
        if not statuses or any(s is None for s in statuses.values()):
            return None
        leaders = {s["leader"] for s in statuses.values()}
        if len(leaders) != 1 or None in leaders:
            return None
        (leader_id,) = leaders
        index = next((n.index for n in self.nodes if n.id == leader_id), None)
        if index is None or index not in statuses or statuses[index]["role"] != "leader":
            return None
        return index

    def wait_ready(self, timeout: float = 30.0, among: list[int] | None = None) -> int:
        """Wait until the running nodes (or `among`) agree on a leader that leads; returns its index."""
        return self.wait_for(lambda: self.agreed_leader(among), timeout, "an agreed leader")

    def leader(self) -> int:
        return self.wait_ready()

    def wait_for(self, predicate, timeout: float, what: str, interval: float = 0.05) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            for node in self.nodes:
                if node.proc is not None and node.proc.poll() not in (None, -signal.SIGKILL, 0):
                    raise AssertionError(f"node {node.index} exited with {node.proc.returncode}:\n{node.log_tail()}")
            value = predicate()
            if value is not None and value is not False:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} within {timeout}s; statuses {self.statuses()}\n{self.logs()}")
            time.sleep(interval)

    def ctl(self, i: int, *args: str) -> subprocess.CompletedProcess:
        """`warren ctl ARGS` against node i."""
        cmd = [sys.executable, "-m", "node.cli", "ctl", "--host", "127.0.0.1", "--port", str(self.nodes[i].http_port),
               *args]  # fmt: skip
        return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60)

    def logs(self) -> str:
        return "\n".join(f"--- node {n.index} ({n.id}):\n{n.log_tail()}" for n in self.nodes)

    # -- the key-value probe ---------------------------------------------------------

    def put(self, i: int, key: str, value: str, idempotency_key: str = "", timeout: float = 5.0) -> dict:
        body = {"value": value, "idempotency_key": idempotency_key, "timeout": timeout}
        return self.nodes[i].http("PUT", f"/api/cluster/test/kv/{key}", body, timeout=timeout + 5)

    def get(self, i: int, key: str, consistent: bool = False) -> dict | None:
        path = f"/api/cluster/test/kv/{key}" + ("?consistent=true" if consistent else "")
        try:
            return self.nodes[i].http("GET", path)
        except HttpError as e:
            if e.status == 404:
                return None
            raise

    def kv(self, i: int) -> dict[str, tuple[str, int]]:
        return {x["key"]: (x["value"], x["version"]) for x in self.nodes[i].http("GET", "/api/cluster/test/kv")}
