"""A client for the management API (urllib), Prometheus text parsing, and
`warren server` in a child process with ephemeral ports."""

from __future__ import annotations

import base64
import json
import os
import re
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict = field(default_factory=dict)


class Api:
    """The management API over urllib, as guest unless told otherwise."""

    def __init__(self, port: int, user: str = "guest", password: str = "guest", host: str = "127.0.0.1",
                 tls: ssl.SSLContext | None = None):  # fmt: skip
        self.port, self.user, self.password, self.host = port, user, password, host
        self.tls = tls  # HTTPS with this client context

    def as_user(self, user: str, password: str) -> Api:
        return Api(self.port, user, password, self.host, self.tls)

    def request(self, method: str, path: str, body: Any = None, headers: dict | None = None,
                auth: bool = True) -> Reply:  # fmt: skip
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        scheme = "https" if self.tls is not None else "http"
        req = urllib.request.Request(f"{scheme}://{self.host}:{self.port}{path}", data=data, method=method)
        if auth:
            token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
            req.add_header("Authorization", "Basic " + token)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=10, context=self.tls) as resp:
                raw, status, hdrs = resp.read(), resp.status, dict(resp.headers)
        except urllib.error.HTTPError as e:
            raw, status, hdrs = e.read(), e.code, dict(e.headers)
        ctype = hdrs.get("Content-Type", "")
        parsed = json.loads(raw) if raw and ctype.startswith("application/json") else raw.decode()
        return Reply(status, parsed, hdrs)

    def get(self, path: str, **kw) -> Reply:
        return self.request("GET", path, **kw)

    def put(self, path: str, body: Any = None, **kw) -> Reply:
        return self.request("PUT", path, {} if body is None else body, **kw)

    def post(self, path: str, body: Any = None, **kw) -> Reply:
        return self.request("POST", path, {} if body is None else body, **kw)

    def delete(self, path: str, **kw) -> Reply:
        return self.request("DELETE", path, **kw)


def server_command(data_dir: Path, *extra_args: str) -> list[str]:
    """`warren server` on `data_dir` with every port ephemeral."""
    return [sys.executable, "-m", "node.cli", "server", "--data-dir", str(data_dir), "--listen-host", "127.0.0.1",
            "--amqp-port", "0", "--http-port", "0", "--metrics-port", "0", "--grpc-port", "0", *extra_args]  # fmt: skip


class NodeProcess:
    """`warren server` in a child process with every port ephemeral; the
    ports come from its startup line."""

    def __init__(self, data_dir: Path, *extra_args: str, env: dict | None = None):
        cmd = server_command(data_dir, *extra_args)
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=dict(os.environ, **(env or {})))  # fmt: skip
        line = self.proc.stdout.readline()
        m = re.search(r"listening on amqp://[^:]+:(\d+) http=(\d+) metrics=(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"node did not start: {line!r} {self.proc.stderr.read()}")
        self.amqp_port, self.http_port, self.metrics_port = (int(g) for g in m.groups())

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}"

    def ctl(self, *args: str, env: dict | None = None, port: bool = True) -> subprocess.CompletedProcess:
        """Runs `warren ctl ARGS` against this node (--port unless port=False)."""
        where = ["--host", "127.0.0.1"] + (["--port", str(self.http_port)] if port else [])
        cmd = [sys.executable, "-m", "node.cli", "ctl", *where, *args]
        return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=30,
                              env=dict(os.environ, **(env or {})))  # fmt: skip

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def scrape(broker_thread: Any, path: str = "/metrics/per-object") -> str:
    """A Prometheus page: the per-object one unless `path` says (/metrics is aggregated by default)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{broker_thread.broker.metrics_port}{path}", timeout=10) as r:
        return r.read().decode()


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one series in Prometheus text (labels must all match)."""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][\w:]*)(\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(m.group(4))
    raise KeyError(f"no sample {name}{labels}")
