"""Fixtures that run a real Warren node: in a thread of this process (fast,
and topology can be created through the Python API until the management
node lands), or as a separate process that a test may kill -9; `node` and
`api` add its HTTP API and Prometheus endpoint on ephemeral ports, with the
client of tests/support/mgmt_client.py."""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import tls_certs
import uvloop
from mgmt_client import Api, NodeProcess
from raw_client import RawClient

from metadata import commands as mc
from node.broker import Broker
from node.config import Config
from node.vhosts.metadata_store import new_key
from routing.users import hash_password

REPO = Path(__file__).resolve().parents[2]


class BrokerThread:
    def __init__(self, config: Config):
        self.config = config
        self.loop = uvloop.new_event_loop()
        self.broker = Broker(config)
        self._thread = threading.Thread(target=self.loop.run_forever, name="warren-node", daemon=True)

    def start(self) -> BrokerThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.broker.start(), self.loop).result(30)
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():  # stopped already (a test that restarts a node)
            return
        try:
            asyncio.run_coroutine_threadsafe(self.broker.stop(), self.loop).result(30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            if not self._thread.is_alive():
                self.loop.close()  # its epoll, eventfd and pipe: a suite starts hundreds of brokers

    def call(self, fn, *args, **kwargs):
        """Runs fn on the node's loop and returns its result."""

        async def run():
            result = fn(*args, **kwargs)
            return await result if inspect.isawaitable(result) else result

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def metadata(self, command):
        """Commits a metadata command (metadata/commands.py) through the node's store."""
        return self.call(self.broker.metadata.run, command)

    def add_vhost(self, name: str) -> None:
        self.metadata(mc.AddVHost(new_key(), name))

    def add_user(self, name: str, password: str, tags: tuple = ()) -> None:
        self.metadata(mc.PutUser(new_key(), name, hash_password(password), tuple(tags)))

    def set_permissions(self, user: str, vhost: str, configure: str = ".*", write: str = ".*",
                        read: str = ".*") -> None:  # fmt: skip
        self.metadata(mc.SetPermissions(new_key(), user, vhost, configure, write, read))

    @property
    def vhost(self):
        return self.broker.vhosts["/"]

    def declare_queue(self, name: str, durable: bool = True, **arguments):
        return self.call(self.vhost.declare_queue, name, durable, None, False, arguments)[0]

    def queue(self, name: str):
        return self.vhost.queues[name]

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.broker.amqp_port}"

    @property
    def port(self) -> int:
        return self.broker.amqp_port


def make_config(data_dir: Path, **overrides) -> Config:
    cfg = Config(data_dir=str(data_dir), listen_host="127.0.0.1", amqp_port=0, http_port=0, metrics_port=0,
                 grpc_port=0, node_name="warren@test", amqps_port=0, https_port=0, metrics_tls_port=0)
    for k, v in overrides.items():
        setattr(cfg, k, v)
    return cfg


@pytest.fixture
def broker_factory(tmp_path):
    started: list[BrokerThread] = []

    def start(data_dir: Path | None = None, **overrides) -> BrokerThread:
        b = BrokerThread(make_config(data_dir or tmp_path / "data", **overrides)).start()
        started.append(b)
        return b

    yield start
    for b in started:
        try:
            b.stop()
        except Exception:
            pass


@pytest.fixture
def broker(broker_factory) -> BrokerThread:
    return broker_factory()


class BrokerProcess:
    """`warren server` in a child process, for kill -9 and SIGTERM tests."""

    def __init__(self, data_dir: Path, definitions: Path | None = None, extra_env: dict | None = None,
                 extra_args: list[str] | None = None):  # fmt: skip
        cmd = [sys.executable, "-m", "node.cli", "server", "--data-dir", str(data_dir), "--amqp-port", "0", "--http-port", "0", "--metrics-port", "0",
               "--grpc-port", "0", "--listen-host", "127.0.0.1", *(extra_args or [])]  # fmt: skip
        if definitions:
            cmd += ["--definitions", str(definitions)]
        env = dict(os.environ, **(extra_env or {}))
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline()  # the node prints where it listens once it does
        self.banner = line
        m = re.search(r"listening on amqp://[^:]+:(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"broker did not start: {line!r} {self.proc.stderr.read()}")
        self.port = int(m.group(1))
        self.http_port = int(re.search(r"http=(\d+)", line).group(1))

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}"

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(20)


@pytest.fixture
def broker_process_factory():
    procs: list[BrokerProcess] = []

    def start(data_dir: Path, **kw) -> BrokerProcess:
        p = BrokerProcess(data_dir, **kw)
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait(10)


@pytest.fixture
def node(broker_factory) -> BrokerThread:
    return broker_factory(http_port=0, metrics_port=0)


@pytest.fixture
def api(node) -> Api:
    return Api(node.broker.http_port)


@pytest.fixture(scope="module")
def node_process(tmp_path_factory):
    p = NodeProcess(tmp_path_factory.mktemp("ctl-node"))
    yield p
    p.stop()


@pytest.fixture(scope="session")
def certs(tmp_path_factory) -> tls_certs.Certs:
    """A CA, server and client certificates from scripts/gen-certs.sh; a
    test that changes the server's files copies them first (`own_certs`)."""
    return tls_certs.make(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def own_certs(certs, tmp_path) -> tls_certs.Certs:
    """The session's certificates, copied for a test that renews them."""
    out = tmp_path / "certs"
    shutil.copytree(certs.dir, out)
    return tls_certs.Certs(out)


@pytest.fixture
def raw_clients():
    """`raw_clients(broker, **kw)` connects a RawClient (tests/support/raw_client.py); all closed at teardown."""
    clients: list[RawClient] = []

    def make(broker, **kw) -> RawClient:
        c = RawClient(broker.port, **kw)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()
