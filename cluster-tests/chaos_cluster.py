"""A three-node Warren cluster under docker compose, and the faults the chaos scenarios inject.

    prepared = prepare_docker()           # engine up, base image, Warren's image (cached layers)
    c = ComposeCluster(prepared.image, history=History())
    c.up()                                # compose up, every node healthy, one leader for all
    c.partition("warren3")                # iptables inside warren3: drop warren1 and warren2
    c.heal()
    c.kill9("warren2"); c.start("warren2"); c.pause("warren1"); c.unpause("warren1")
    c.restart("warren3"); c.rolling_restart(); c.forget("warren2"); c.rejoin("warren2")
    c.down()                              # compose down -v: containers, network, volumes

The cluster is deploy/docker-compose.yml with cluster-tests/docker-compose.chaos.yml over it,
as a compose project of its own (warren-chaos-<pid>-<random>). The harness runs on the host and
talks to every node at its address on the compose network (AMQP 5672, HTTP 15672); node 1's
ports are also published on free host ports. Every fault is recorded in the history given to
the constructor (process "nemesis").
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos_clock import FAKETIME_FILE, ClockFaults
from chaos_disk import DiskFaults
from chaos_history import History
from chaos_links import LinkFaults
from chaos_membership import MembershipFaults
from http_json import HttpError, request_json  # tests/support, on sys.path by conftest.py

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SCRIPTS = REPO / "scripts"
COMPOSE_FILES = [REPO / "deploy" / "docker-compose.yml", HERE / "docker-compose.chaos.yml"]
BASE_IMAGE = os.environ.get("WARREN_BASE_IMAGE", "warren-base:bookworm")
IMAGE = os.environ.get("WARREN_CHAOS_IMAGE", "warren:chaos")
NODES = ("warren1", "warren2", "warren3")
FIVE_NODES = (*NODES, "warren4", "warren5")  # with docker-compose.five.yml
GRPC_PORT = 25672
PYTHON = "/opt/warren/bin/python"  # the image's interpreter (deploy/Dockerfile)
USER, PASSWORD = "chaos", "chaos-password"
# The packages deploy/Dockerfile copies into the image, read from its COPY lines (one list, not two)
PACKAGES = tuple(re.findall(r"^COPY (\w+) /src/\1$", (REPO / "deploy" / "Dockerfile").read_text(), re.M))
DEPLOY_FILES = ("Dockerfile", "entrypoint.sh", "healthcheck.py")


class DockerUnavailable(Exception):
    """No Docker engine can run on this machine (scripts/ensure-docker.sh said so)."""


class ClusterError(AssertionError):
    pass


def _docker():
    import docker  # the SDK is a test extra; the checker tests do not need it

    return docker.from_env(version="auto", timeout=120)


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("0.0.0.0", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


# ---------------------------------------------------------------- engine and images


@dataclass
class Prepared:
    image: str
    compose: list[str]
    timings: list[tuple[str, float]] = field(default_factory=list)


def compose_command() -> list[str]:
    """`docker compose` (the plugin) when it works, else `docker-compose` (v1)."""
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise ClusterError("neither 'docker compose' nor 'docker-compose' is installed (scripts/ensure-docker.sh)")


def prepare_docker(source: str = "worktree", image: str = IMAGE, base: str = BASE_IMAGE) -> Prepared:
    """Engine up, base image built (or cached), Warren's image built from `source`
    ("worktree": the files as they are; "head": the packages as committed)."""
    timings = []
    started = time.monotonic()
    run = subprocess.run([str(SCRIPTS / "ensure-docker.sh")], capture_output=True, text=True, timeout=600)
    if run.returncode == 3:
        raise DockerUnavailable(run.stderr.strip()[-2000:])
    if run.returncode != 0:
        raise ClusterError(f"scripts/ensure-docker.sh failed ({run.returncode}):\n{run.stderr[-3000:]}")
    timings.append(("ensure-docker.sh", time.monotonic() - started))

    started = time.monotonic()
    if base == BASE_IMAGE and base.startswith("warren-base:"):
        run = subprocess.run([str(SCRIPTS / "build-base-image.sh")], capture_output=True, text=True, timeout=900,
                             env={**os.environ, "BASE_IMAGE_TAG": base})  # fmt: skip
        if run.returncode != 0:
            raise ClusterError(f"scripts/build-base-image.sh failed:\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}")
        timings.append((f"base image {base} ({run.stdout.strip().splitlines()[-1]})", time.monotonic() - started))

    started = time.monotonic()
    build_image(image, base, source)
    timings.append((f"image {image} from the {source} (deploy/Dockerfile)", time.monotonic() - started))
    return Prepared(image, compose_command(), timings)


def stage_context(dest: Path, source: str = "worktree") -> Path:
    """A minimal build context in `dest`: pyproject.toml, the packages, deploy/ and extra CAs.
    `source`: "worktree" (the files as they are), "head" (as committed) or "ref:<commit or
    tag>" (as in that commit: an older release for the upgrade test; deploy/ stays this
    checkout's, so an old tree builds with today's Dockerfile)."""
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so.tmp")
    if source == "worktree":
        shutil.copy2(REPO / "pyproject.toml", dest / "pyproject.toml")
        for pkg in PACKAGES:
            if (REPO / pkg).is_dir():
                shutil.copytree(REPO / pkg, dest / pkg, ignore=ignore)
    elif source == "head" or source.startswith("ref:"):
        ref = "HEAD" if source == "head" else source[len("ref:") :]
        tracked = subprocess.run(["git", "ls-tree", "--name-only", ref], cwd=REPO, capture_output=True,
                                 text=True, check=True).stdout.split()  # fmt: skip
        paths = [p for p in ("pyproject.toml", *PACKAGES) if p in tracked]
        archive = subprocess.run(["git", "archive", "--format=tar", ref, *paths], cwd=REPO, capture_output=True,
                                 check=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    else:
        raise ValueError(f"source must be 'worktree', 'head' or 'ref:<commit>', not {source!r}")
    for pkg in PACKAGES:  # the Dockerfile copies each one
        (dest / pkg).mkdir(exist_ok=True)
    deploy = dest / "deploy"
    (deploy / "extra-ca").mkdir(parents=True, exist_ok=True)
    for name in DEPLOY_FILES:
        shutil.copy2(REPO / "deploy" / name, deploy / name)
    # CAs this machine added (e.g. a TLS-intercepting proxy in front of PyPI): pip needs them too.
    cas = sorted(Path("/usr/local/share/ca-certificates").glob("**/*.crt"))
    if os.environ.get("WARREN_BUILD_CA_FILE"):
        cas.append(Path(os.environ["WARREN_BUILD_CA_FILE"]))
    for i, ca in enumerate(cas):
        shutil.copy2(ca, deploy / "extra-ca" / f"{i:02d}-{ca.stem}.crt")
    return dest


def build_image(tag: str = IMAGE, base: str = BASE_IMAGE, source: str = "worktree") -> str:
    """Build deploy/Dockerfile on `base` (with iptables, tc and libfaketime) into `tag`; returns the image id."""
    client = _docker()
    with tempfile.TemporaryDirectory(prefix="warren-image-") as tmp:
        ctx = stage_context(Path(tmp) / "ctx", source)
        log: list[str] = []
        image_id = None
        for chunk in client.api.build(path=str(ctx), dockerfile="deploy/Dockerfile", tag=tag, rm=True, forcerm=True,
                                      buildargs={"BASE_IMAGE": base, "WITH_IPTABLES": "1", "WITH_FAKETIME": "1"}, decode=True):  # fmt: skip
            if "stream" in chunk:
                log.append(chunk["stream"])
            if "aux" in chunk and "ID" in chunk["aux"]:
                image_id = chunk["aux"]["ID"]
            if "error" in chunk:
                raise ClusterError(f"docker build failed: {chunk['error']}\n{''.join(log)[-4000:]}")
    return image_id or client.images.get(tag).id


# ---------------------------------------------------------------- HTTP


def http(host: str, port: int, method: str, path: str, body: Any = None, timeout: float = 5.0,
         user: str = USER, password: str = PASSWORD) -> Any:  # fmt: skip
    authorization = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    return request_json(f"http://{host}:{port}{path}", method, authorization, body, timeout)


# ---------------------------------------------------------------- the cluster


class ComposeCluster(ClockFaults, DiskFaults, LinkFaults, MembershipFaults):
    """See the module docstring."""

    def __init__(self, image: str = IMAGE, history: History | None = None, nodes: Iterable[str] = NODES,
                 project: str | None = None, artifacts: Path | None = None,
                 compose: list[str] | None = None, faketime: Iterable[str] = (), workers: int = 1) -> None:  # fmt: skip
        """`workers`: each node's worker processes (`warren server --workers`)."""
        self.image = image
        self.workers = workers
        # the nodes under libfaketime, whose clocks the clock faults can move (chaos_clock.py)
        self.faketime = frozenset(faketime)
        self.history = history if history is not None else History()
        self.nodes = list(nodes)
        self.project = project or f"warren-chaos-{os.getpid()}-{secrets.token_hex(3)}"
        self.artifacts = artifacts
        self.compose_cmd = compose or compose_command()
        self.client = _docker()
        amqp, http_port, metrics = _free_ports(3)
        self.published = {"amqp": amqp, "http": http_port, "metrics": metrics}  # node 1's, on the host
        self.env = {**os.environ, "WARREN_IMAGE": image, "WARREN_AMQP_HOST_PORT": str(amqp),
                    "WARREN_HTTP_HOST_PORT": str(http_port), "WARREN_METRICS_HOST_PORT": str(metrics),
                    "WARREN_CLUSTER_SECRET": "chaos-" + secrets.token_hex(8),
                    "WARREN_DEFAULT_USER": USER, "WARREN_DEFAULT_PASSWORD": PASSWORD,
                    "WARREN_WORKERS": str(workers)}  # fmt: skip
        self.images: dict[str, str] = {}  # node -> the image it runs when not `image` (replace)
        # node -> extra environment of its container (libfaketime's to begin with)
        self.node_env: dict[str, dict[str, str]] = {n: self._faketime_env(n) for n in self.faketime}
        self._override_dir = tempfile.mkdtemp(prefix="warren-compose-")
        self.partitions: dict[str, set[str]] = {}  # node -> the nodes it drops
        self.paused: dict[str, str] = {}  # node -> how: "freezer" (docker pause) or "sigstop"
        self.shaped: dict[str, tuple[int, int, int]] = {}  # node -> (rate kbit/s, loss %, delay ms) of its slow link
        self.clocks: dict[str, str] = {}  # node -> its wall clock's fault ("+60s", "x1.5") until reset
        self.disks: dict[str, str] = {}  # node -> the disk op failing with ENOSPC ("write", "fsync") until cleared
        self.forgotten: dict[str, list[str]] = {}  # node forgotten and wiped -> the quorum queues it had replicas of
        self._ips: dict[str, str] = {}

    # -- compose -----------------------------------------------------------------------------

    def compose(self, *args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess:
        five = [HERE / "docker-compose.five.yml"] if len(self.nodes) == len(FIVE_NODES) else []
        files = [a for f in [*COMPOSE_FILES, *five, *self._image_override()] for a in ("-f", str(f))]
        cmd = [*self.compose_cmd, "-p", self.project, *files, *args]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=self.env, cwd=REPO)
        if check and run.returncode != 0:
            raise ClusterError(
                f"{' '.join(cmd)} failed ({run.returncode}):\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
            )
        return run

    def _faketime_env(self, node: str) -> dict[str, str]:
        """deploy/entrypoint.sh preloads libfaketime when this is set (docker-compose.chaos.yml)."""
        return {"WARREN_FAKETIME_FILE": FAKETIME_FILE} if node in self.faketime else {}

    def _image_override(self) -> list[Path]:
        """A compose file giving nodes their own image (replaced ones) and extra environment
        (none while neither is set)."""
        nodes = sorted(set(self.images) | {n for n, e in self.node_env.items() if e})
        if not nodes:
            return []
        lines = ["services:"]
        for n in nodes:
            lines.append(f"  {n}:")
            if n in self.images:
                lines.append(f"    image: {json.dumps(self.images[n])}")
            if self.node_env.get(n):
                lines.append("    environment:")
                lines += [f"      {k}: {json.dumps(v)}" for k, v in sorted(self.node_env[n].items())]
        path = Path(self._override_dir) / "nodes.yml"
        path.write_text("\n".join(lines) + "\n")
        return [path]

    def replace(self, node: str, image: str, timeout: float = 90.0, env: dict[str, str] | None = None) -> None:
        """A rolling upgrade's step: stop the node (SIGTERM), start a container of `image` in
        its place on the same volume and address, with `env` as its extra environment (none by
        default); returns once its management API answers."""
        with self._nemesis("replace", {"node": node, "image": image}, node):
            self.container(node).stop(timeout=30)
            self.images[node] = image
            self.node_env[node] = {**self._faketime_env(node), **(env or {})}
            self.compose("up", "-d", "--no-deps", "--no-build", node)
            self._ips.pop(node, None)
            self.wait_answers(node, timeout)

    def up(self, timeout: float = 90.0) -> str:
        """compose up; waits until docker calls every node healthy and they agree on a leader."""
        self.compose("up", "-d", "--no-build")
        self.wait_docker_healthy(timeout=timeout)
        return self.wait_converged(timeout=timeout)

    def down(self) -> None:
        for node in list(self.paused):
            try:
                self.unpause(node)
            except Exception:
                pass
        self.compose("down", "-v", "--remove-orphans", "-t", "5", check=False, timeout=120)
        shutil.rmtree(self._override_dir, ignore_errors=True)

    # -- containers ----------------------------------------------------------------------------

    def container(self, node: str):
        found = self.client.containers.list(all=True, filters={"label": [
            f"com.docker.compose.project={self.project}", f"com.docker.compose.service={node}"]})  # fmt: skip
        if not found:
            raise ClusterError(f"no container for {node} in compose project {self.project}")
        return found[0]

    def state(self, node: str) -> str:
        """running | paused | exited | ... as docker says."""
        return self.container(node).attrs["State"]["Status"]

    def health(self, node: str) -> str | None:
        return (self.container(node).attrs["State"].get("Health") or {}).get("Status")

    def ip(self, node: str) -> str:
        """The node's address on the compose network: asked of docker once per container start
        (start and restart forget it), remembered while the node is down."""
        if node in self._ips:
            return self._ips[node]
        networks = self.container(node).attrs["NetworkSettings"]["Networks"]
        ips = [n["IPAddress"] for n in networks.values() if n.get("IPAddress")]
        self._ips.update({node: ips[0]} if ips else {})
        if node not in self._ips:
            raise ClusterError(f"{node} has no address (state {self.state(node)})")
        return self._ips[node]

    def node_id(self, node: str) -> str:
        return f"{node}:{GRPC_PORT}"

    def node_of(self, node_id: str | None) -> str | None:
        """The container of a cluster address (warren1:PORT) or of a node name (warren@warren1,
        how the HTTP API names a queue's leader once it knows the member's name)."""
        if node_id is None:
            return None
        return node_id.split("@", 1)[1] if "@" in node_id else node_id.rsplit(":", 1)[0]

    def amqp_url(self, node: str) -> str:
        return f"amqp://{USER}:{PASSWORD}@{self.ip(node)}:5672"

    def exec(self, node: str, *cmd: str, check: bool = True) -> str:
        code, output = self.container(node).exec_run(list(cmd))
        text = output.decode(errors="replace") if isinstance(output, bytes) else str(output)
        if check and code != 0:
            raise ClusterError(f"{' '.join(cmd)} in {node} exited {code}: {text.strip()}")
        return text

    def logs(self, tail: int = 60) -> str:
        out = []
        for node in self.nodes:
            try:
                text = self.container(node).logs(tail=tail).decode(errors="replace")
            except Exception as e:  # a report must not fail on a missing container
                text = f"(no logs: {e})"
            out.append(f"--- {node}:\n{text}")
        return "\n".join(out)

    def save_artifacts(self) -> None:
        if self.artifacts is None:
            return
        self.artifacts.mkdir(parents=True, exist_ok=True)
        for node in self.nodes:
            try:
                (self.artifacts / f"{node}.log").write_bytes(self.container(node).logs())
            except Exception:
                pass
        self.history.dump(self.artifacts / "history.jsonl")

    # -- HTTP and cluster views ------------------------------------------------------------------

    def http(self, node: str, method: str, path: str, body: Any = None, timeout: float = 5.0) -> Any:
        return http(self.ip(node), 15672, method, path, body, timeout)

    def status(self, node: str, timeout: float = 3.0) -> dict | None:
        """The node's /api/cluster, or None when it does not answer."""
        if node in self.paused:
            return None
        try:
            return self.http(node, "GET", "/api/cluster", timeout=timeout)
        except (OSError, HttpError, ClusterError):
            return None

    def agreed_leader(self, among: Iterable[str] | None = None, full: bool = True) -> str | None:
        """The leader every node of `among` (default: all) names, once it is one of them and
        leads; with `full`, also every one of them must see every member, all reachable.
        Else None."""
        among = list(among or self.nodes)
        statuses = {n: self.status(n) for n in among}
        if any(s is None for s in statuses.values()):
            return None
        leaders = {s["leader"] for s in statuses.values()}
        if len(leaders) != 1 or None in leaders:
            return None
        leader = self.node_of(next(iter(leaders)))
        # The leader must be one of them and say so itself: nodes keep naming a leader that
        # was just killed, paused or cut off until their election timeout runs out.
        if leader not in statuses or statuses[leader]["role"] != "leader":
            return None
        if full:
            for s in statuses.values():
                if len(s["members"]) != len(self.nodes) or s["reachable"] != len(self.nodes):
                    return None
        return leader

    def wait_for(self, predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value is not None and value is not False:
                return value
            if time.monotonic() > deadline:
                statuses = {n: self.status(n) for n in self.nodes}
                raise ClusterError(f"no {what} within {timeout}s; statuses {json.dumps(statuses)}\n{self.logs(30)}")
            time.sleep(interval)

    def wait_converged(self, among: Iterable[str] | None = None, timeout: float = 60.0, full: bool = True) -> str:
        """Wait until the nodes (default: all) agree on one leader (with `full`: and see every
        member reachable); returns the leader."""
        among = list(among or self.nodes)
        return self.wait_for(lambda: self.agreed_leader(among, full), timeout, f"agreed leader among {among}")

    def wait_docker_healthy(self, nodes: Iterable[str] | None = None, timeout: float = 90.0) -> None:
        nodes = list(nodes or self.nodes)

        def healthy() -> bool:
            for node in nodes:
                c = self.container(node)
                if c.attrs["State"]["Status"] not in ("running", "paused"):
                    raise ClusterError(f"{node} is {c.attrs['State']['Status']}:\n"
                                       f"{c.logs(tail=40).decode(errors='replace')}")  # fmt: skip
            return all(self.health(n) == "healthy" for n in nodes)

        self.wait_for(healthy, timeout, f"docker health 'healthy' for {nodes}", interval=0.5)

    def wait_answers(self, node: str, timeout: float = 60.0) -> None:
        """Until the node's management API answers (quicker than docker's health interval)."""

        def answers() -> bool:
            try:
                self.http(node, "GET", "/api/health/checks/alarms", timeout=2)
                return True
            except (OSError, HttpError, ClusterError):
                return False

        self.wait_for(answers, timeout, f"answer from {node}", interval=0.2)

    # -- faults (each one recorded in the history, process "nemesis") ----------------------------

    def _nemesis(self, f: str, value: Any, node: str | None = None):
        return self.history.op("nemesis", f, value, node=node)

    def partition(self, node: str, others: Iterable[str] | None = None) -> None:
        """Cut `node` off from `others` (default: every other node), both ways: iptables in
        `node`'s container drops what comes from and goes to their addresses. Clients (the
        host) still reach every node."""
        others = [o for o in (others or self.nodes) if o != node]
        with self._nemesis("partition", {"node": node, "from": others}, node):
            for other in others:
                ip = self.ip(other)
                self.exec(node, "iptables", "-w", "-A", "INPUT", "-s", ip, "-j", "DROP")
                self.exec(node, "iptables", "-w", "-A", "OUTPUT", "-d", ip, "-j", "DROP")
                self.partitions.setdefault(node, set()).add(other)

    def partition_one_way(self, node: str, others: Iterable[str] | None = None) -> None:
        """`node` drops what comes from `others` (default: every other node) and still sends
        to them: they hear it, it hears nothing of them."""
        others = [o for o in (others or self.nodes) if o != node]
        with self._nemesis("partition-one-way", {"node": node, "from": others}, node):
            for other in others:
                self.exec(node, "iptables", "-w", "-A", "INPUT", "-s", self.ip(other), "-j", "DROP")
                self.partitions.setdefault(node, set()).add(other)

    def queue_member(self, queue: str, node: str, add: bool, via: Iterable[str] | None = None,
                     timeout: float = 30.0) -> None:  # fmt: skip
        """Add `node` to (remove it from) the quorum queue `queue` in "/" (rabbitmq-queues
        add_member / delete_member through the HTTP API of the first of `via` that does it;
        default every node), retried until `timeout`: a membership change is refused while the
        queue has no leader."""
        path = f"/api/quorum-queues/%2F/{queue}/members"
        with self._nemesis("add-member" if add else "delete-member", {"queue": queue, "node": node}, node) as op:
            deadline, error = time.monotonic() + timeout, None
            while time.monotonic() < deadline:
                for through in via or self.nodes:
                    if through in self.paused:
                        continue
                    try:
                        if add:
                            self.http(through, "POST", path, {"node": self.node_id(node)}, timeout=10)
                        else:
                            self.http(through, "DELETE", f"{path}/{self.node_id(node)}", timeout=10)
                        op.ok(via=through)
                        return
                    except (OSError, HttpError, ClusterError) as e:
                        error = e
                time.sleep(0.5)
            raise ClusterError(f"{'add' if add else 'delete'} member {node} of {queue}: {error}")

    def heal(self) -> None:
        """Drop every partition rule in every node that runs."""
        with self._nemesis("heal", sorted(self.partitions)):
            for node in self.nodes:
                if node not in self.paused and self.state(node) == "running":
                    self.exec(node, "iptables", "-w", "-F")  # every chain of the filter table: INPUT, OUTPUT
            self.partitions.clear()

    def kill9(self, node: str) -> None:
        """docker kill -s KILL: the node dies at once, nothing flushed beyond what it fsynced."""
        self.ip(node)  # remember its address
        with self._nemesis("kill9", node, node):
            container = self.container(node)
            container.kill(signal="SIGKILL")
            container.wait(timeout=30)
            self.partitions.pop(node, None)  # its rules lived in its network namespace, gone with it
            self.paused.pop(node, None)

    def start(self, node: str, timeout: float = 60.0) -> None:
        """Start a stopped or killed node; returns once its management API answers."""
        with self._nemesis("start", node, node):
            self.container(node).start()
            self._ips.pop(node, None)
            self.wait_answers(node, timeout)

    def stop(self, node: str, timeout: int = 10) -> None:
        """docker stop: SIGTERM, then SIGKILL after `timeout` seconds."""
        with self._nemesis("stop", node, node):
            self.container(node).stop(timeout=timeout)

    def pause(self, node: str, method: str = "freezer") -> None:
        """Freeze every process of the node: docker pause (the cgroup freezer), retried, and
        SIGSTOP to its process when the freezer keeps failing (it can, on cgroup v1, while a
        thread sits in an fsync), or SIGSTOP at once with method="sigstop". Either way it
        neither runs nor answers until unpause."""
        if method not in ("freezer", "sigstop"):
            raise ValueError(f"pause method must be 'freezer' or 'sigstop', not {method!r}")
        with self._nemesis("pause", node, node) as op:
            container = self.container(node)
            if method == "sigstop":
                self._signal_node(container, "STOP")
                self.paused[node] = "sigstop"
                op.ok(method="sigstop")
                return
            error = None
            for _ in range(3):
                try:
                    container.pause()
                    self.paused[node] = "freezer"
                    op.ok(method="freezer")
                    return
                except Exception as e:  # docker.errors.APIError: "unable to freeze"
                    error = e
                    time.sleep(0.2)
            self._signal_node(container, "STOP")
            self.paused[node] = "sigstop"
            op.ok(method="sigstop", freezer_error=str(error)[:200])

    def unpause(self, node: str) -> None:
        with self._nemesis("unpause", node, node):
            container = self.container(node)
            if self.paused.pop(node, "freezer") == "sigstop":
                self._signal_node(container, "CONT")
            else:
                container.unpause()

    def _signal_node(self, container, sig: str) -> None:
        """SIGSTOP or SIGCONT to the node's processes: its server (the container's first
        process) and, with several workers, every worker (kill(-1) in the container reaches
        every process there but the first and the caller; dash's `kill` cannot say -1)."""
        if self.workers > 1:
            container.exec_run([PYTHON, "-c", f"import os, signal; os.kill(-1, signal.SIG{sig})"])
        container.kill(signal=f"SIG{sig}")

    def restart(self, node: str, timeout: float = 60.0) -> None:
        """A clean restart (SIGTERM, wait, start); returns once the node answers again."""
        with self._nemesis("restart", node, node):
            self.container(node).restart(timeout=10)
            self._ips.pop(node, None)
            self.wait_answers(node, timeout)

    def rolling_restart(self, order: Iterable[str] | None = None, timeout: float = 60.0) -> None:
        """Restart the nodes one at a time, each once the cluster has converged again."""
        with self._nemesis("rolling-restart", list(order or self.nodes)):
            for node in order or self.nodes:
                self.restart(node, timeout)
                self.wait_converged(timeout=timeout)
