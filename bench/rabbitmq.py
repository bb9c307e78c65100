#!/usr/bin/env python3
"""A private RabbitMQ 3.10 node for benchmarking Warren against.

The node runs from the Debian package (``bench/setup.sh`` installs it) but with
everything of its own, so that it never clashes with Warren or a system RabbitMQ:

* non-default ports, bound to 127.0.0.1: AMQP 5682, management HTTP 15682,
  Erlang distribution 25682 (all configurable);
* its own node name, data (mnesia), log, pid, config, enabled-plugins and
  Erlang cookie ($HOME) under a fresh temporary directory, removed on stop;
* plugins ``rabbitmq_amqp1_0`` and ``rabbitmq_management`` (and any in ``plugins``, e.g. ``rabbitmq_shovel``).

The AMQP 1.0 plugin of 3.x addresses an existing queue as ``/amq/queue/NAME``
(``/queue/NAME`` would auto-create a *non-durable* queue), so the benchmark
queues are declared up front through the HTTP API.

Library use::

    with RabbitNode() as node:          # starts, waits until ready
        node.declare_queue("q", durable=True)
        ...                             # arrow against 127.0.0.1:5682, "/amq/queue/q"
                                        # stopped and cleaned up on exit, even on Ctrl-C

Command line::

    bench/rabbitmq.py check             # start, declare queues, print status, stop
    bench/rabbitmq.py run               # start, declare queues, hold until Ctrl-C
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import procs  # noqa: E402

RABBIT_BIN = os.environ.get("RABBITMQ_BIN_DIR", "/usr/lib/rabbitmq/bin")
DEFAULT_QUEUES = (("bench-durable", True), ("bench-transient", False))


class RabbitNode:
    def __init__(self, *, amqp_port: int = 5682, mgmt_port: int = 15682, dist_port: int = 25682,
                 nodename: str = "warren_bench_rabbit@localhost", host: str = "127.0.0.1",
                 base_dir: str | None = None, keep: bool = False, user: str = "guest",
                 password: str = "guest", tls: dict | None = None, plugins: tuple[str, ...] = (),
                 extra_conf: str = ""):
        self.amqp_port, self.mgmt_port, self.dist_port = amqp_port, mgmt_port, dist_port
        # {"port", "cert", "key", "ca"}: an AMQPS listener (listeners.ssl.default) beside the plain one
        self.tls = tls
        self.plugins = ("rabbitmq_amqp1_0", "rabbitmq_management", *plugins)  # more: e.g. rabbitmq_shovel
        # more rabbitmq.conf lines (a test sets collect_statistics_interval, for counts it compares)
        self.extra_conf = extra_conf
        self.nodename, self.host = nodename, host
        self.user, self.password = user, password
        self._base_arg, self.keep = base_dir, keep
        self.base: str | None = None
        self.proc = None
        self.log_path: str | None = None

    # ----------------------------------------------------------------- paths/env
    def _env(self) -> dict:
        b = self.base
        env = dict(os.environ)
        env.update({
            # A private HOME holds this node's Erlang cookie, for the server and the CLI.
            "HOME": b,
            "RABBITMQ_NODENAME": self.nodename,
            "RABBITMQ_NODE_IP_ADDRESS": self.host,
            "RABBITMQ_NODE_PORT": str(self.amqp_port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": os.path.join(b, "mnesia"),
            "RABBITMQ_LOG_BASE": os.path.join(b, "log"),
            "RABBITMQ_PID_FILE": os.path.join(b, "rabbit.pid"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": os.path.join(b, "enabled_plugins"),
            "RABBITMQ_CONFIG_FILE": os.path.join(b, "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": os.path.join(b, "advanced.config"),
            # Ignore /etc/rabbitmq/rabbitmq-env.conf.
            "RABBITMQ_CONF_ENV_FILE": os.path.join(b, "rabbitmq-env.conf"),
            # Management listener is set in rabbitmq.conf; keep distribution on loopback too.
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        })
        return env

    def _write_config(self) -> None:
        b = self.base
        for d in ("mnesia", "log"):
            os.makedirs(os.path.join(b, d), exist_ok=True)
        with open(os.path.join(b, "enabled_plugins"), "w") as f:
            f.write(f"[{','.join(self.plugins)}].\n")
        with open(os.path.join(b, "rabbitmq.conf"), "w") as f:
            f.write(
                f"management.tcp.port = {self.mgmt_port}\n"
                f"management.tcp.ip = {self.host}\n"
                "disk_free_limit.absolute = 50MB\n"
                "log.console = false\n"
                "log.file.level = warning\n"
            )
            f.write(self.extra_conf)
            if self.tls:
                f.write(f"listeners.ssl.default = {self.host}:{self.tls['port']}\n"
                        f"ssl_options.certfile = {self.tls['cert']}\n"
                        f"ssl_options.keyfile = {self.tls['key']}\n"
                        f"ssl_options.cacertfile = {self.tls['ca']}\n"
                        "ssl_options.verify = verify_none\n"
                        "ssl_options.fail_if_no_peer_cert = false\n"
                        "ssl_options.versions.1 = tlsv1.3\n"
                        "ssl_options.versions.2 = tlsv1.2\n")
        with open(os.path.join(b, "advanced.config"), "w") as f:
            f.write("[].\n")
        open(os.path.join(b, "rabbitmq-env.conf"), "w").close()

    # ----------------------------------------------------------------- lifecycle
    def start(self, timeout: float = 120.0) -> RabbitNode:
        if not os.path.exists(os.path.join(RABBIT_BIN, "rabbitmq-server")):
            raise RuntimeError(f"{RABBIT_BIN}/rabbitmq-server not found: run bench/setup.sh")
        for port, what in ((self.amqp_port, "RabbitMQ AMQP"), (self.mgmt_port, "RabbitMQ management"),
                           (self.dist_port, "RabbitMQ distribution")):
            procs.require_free(self.host, port, what)
        if self._base_arg:
            os.makedirs(self._base_arg, exist_ok=True)
            self.base = os.path.abspath(self._base_arg)
        else:
            self.base = tempfile.mkdtemp(prefix="warren-bench-rabbitmq-")
        self._write_config()
        self.log_path = os.path.join(self.base, "server.out")
        # Called directly, not through /usr/sbin/rabbitmq-server: the Debian wrapper
        # would su to the rabbitmq user and redirect output to /var/log/rabbitmq.
        self.proc = procs.spawn([os.path.join(RABBIT_BIN, "rabbitmq-server")], env=self._env(),
                                log_path=self.log_path, cwd=self.base)
        t0 = time.monotonic()
        procs.wait_for(self._ready, timeout, f"RabbitMQ node {self.nodename}", proc=self.proc,
                       interval=0.3, log_path=self.log_path)
        print(f"[bench] RabbitMQ {self.version()} ready on {self.host}:{self.amqp_port} "
              f"(management {self.mgmt_port}) in {time.monotonic() - t0:.1f} s; dir {self.base}",
              file=sys.stderr)
        return self

    def _ready(self) -> bool:
        if not procs.port_open(self.host, self.amqp_port):
            return False
        try:
            self.api("GET", "/api/overview")
            return True
        except (OSError, urllib.error.URLError, RuntimeError):
            return False

    def await_startup(self, timeout: int = 60) -> None:
        """Ask the node itself (through the CLI) whether it has fully booted."""
        self.ctl("await_startup", "--timeout", str(timeout))

    def ctl(self, *args: str) -> str:
        import subprocess

        res = subprocess.run([os.path.join(RABBIT_BIN, "rabbitmqctl"), "-n", self.nodename, *args],
                             env=self._env(), capture_output=True, text=True, timeout=120)
        if res.returncode != 0:
            raise RuntimeError(f"rabbitmqctl {' '.join(args)} failed: {res.stderr.strip() or res.stdout}")
        return res.stdout

    def stop(self) -> None:
        if self.proc is not None:
            code = procs.stop(self.proc, term_timeout=30.0)
            print(f"[bench] RabbitMQ node stopped (exit {code})", file=sys.stderr)
            self.proc = None
        if self.base and not self.keep and not self._base_arg:
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> RabbitNode:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

    # ----------------------------------------------------------------- HTTP API
    def api(self, method: str, path: str, body: dict | None = None, timeout: float = 10.0):
        url = f"http://{self.host}:{self.mgmt_port}{path}"
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method)
        token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"{method} {path}: HTTP {e.code} {e.read().decode(errors='replace')}") from e
        return json.loads(raw) if raw else None

    @staticmethod
    def _q(name: str, vhost: str = "/") -> str:
        return f"/api/queues/{urllib.parse.quote(vhost, safe='')}/{urllib.parse.quote(name, safe='')}"

    def version(self) -> str:
        return self.api("GET", "/api/overview").get("rabbitmq_version", "?")

    def declare_queue(self, name: str, durable: bool, queue_type: str = "classic") -> None:
        self.api("PUT", self._q(name), {"durable": durable, "auto_delete": False,
                                        "arguments": {"x-queue-type": queue_type}})

    def purge_queue(self, name: str) -> None:
        self.api("DELETE", self._q(name) + "/contents")

    def delete_queue(self, name: str) -> None:
        self.api("DELETE", self._q(name))

    def queue_info(self, name: str) -> dict:
        return self.api("GET", self._q(name))

    @staticmethod
    def address(name: str) -> str:
        """AMQP 1.0 address of an existing queue on the 3.x plugin."""
        return f"/amq/queue/{name}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=["check", "run"], help="check: start, declare, report, stop; "
                    "run: start, declare, hold until Ctrl-C")
    ap.add_argument("--amqp-port", type=int, default=5682)
    ap.add_argument("--mgmt-port", type=int, default=15682)
    ap.add_argument("--dist-port", type=int, default=25682)
    ap.add_argument("--nodename", default="warren_bench_rabbit@localhost")
    ap.add_argument("--dir", help="use this directory (kept) instead of a fresh temp dir")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir on exit")
    args = ap.parse_args(argv)
    node = RabbitNode(amqp_port=args.amqp_port, mgmt_port=args.mgmt_port, dist_port=args.dist_port,
                      nodename=args.nodename, base_dir=args.dir, keep=args.keep)
    with node:
        node.await_startup()
        for name, durable in DEFAULT_QUEUES:
            node.declare_queue(name, durable)
        for name, _ in DEFAULT_QUEUES:
            info = node.queue_info(name)
            print(f"queue {name}: durable={info['durable']} type={info.get('type')} "
                  f"address={node.address(name)}")
        print(f"node {node.nodename}: amqp 127.0.0.1:{node.amqp_port}, management "
              f"http://127.0.0.1:{node.mgmt_port}/ (guest/guest), dir {node.base}")
        if args.action == "run":
            print("holding the node; Ctrl-C to stop", file=sys.stderr)
            try:
                while node.proc and node.proc.poll() is None:
                    time.sleep(1)
            except KeyboardInterrupt:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
