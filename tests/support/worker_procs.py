"""A node's worker processes (`warren server --workers N`) as tests see them from outside:
which process listens on the AMQP port, which holds a client's connection, and Proton
connections made to land on (and stay on) a chosen worker."""

from __future__ import annotations

import json
import os
import re
import time
import urllib.request

import psutil
from cluster_procs import free_ports
from http_json import request_json
from proton import Message
from proton.utils import BlockingConnection

from node.workers.process import WORKER_ENV

PIN = "/exchanges/amq.direct/pinned"  # a first link that names no queue: the connection stays


def workers(pid: int, port: int, count: int = 2) -> dict[int, psutil.Process]:
    """The worker processes under supervisor `pid` by number, once each listens on `port`."""
    deadline = time.monotonic() + 20
    while True:
        found = {}
        for child in psutil.Process(pid).children():
            try:
                index = int(child.environ()[WORKER_ENV])
                listening = any(c.status == psutil.CONN_LISTEN and c.laddr.port == port
                                for c in child.net_connections("tcp"))  # fmt: skip
            except (psutil.NoSuchProcess, KeyError):
                continue
            if listening:
                found[index] = child
        if len(found) == count:
            return found
        assert time.monotonic() < deadline, f"workers listening: {sorted(found)}"
        time.sleep(0.05)


def peers_of(proc: psutil.Process, port: int) -> set[int]:
    """The client ports of the connections `proc` holds on `port`."""
    return {c.raddr.port for c in proc.net_connections("tcp") if c.status == psutil.CONN_ESTABLISHED
            and c.laddr.port == port and c.raddr}  # fmt: skip


def connect_on(pid: int, port: int, worker: int, user: str = "guest", password: str = "guest",
               pinned: bool = False, count: int = 2, timeout: float | None = None) -> BlockingConnection:  # fmt: skip
    """A client connection the kernel gave to worker `worker` of `count` (others are closed and
    tried again); `pinned`: its first link names no queue, so it stays on that worker."""
    procs = workers(pid, port, count)
    for _ in range(60):
        before = {k: peers_of(p, port) for k, p in procs.items()}
        conn = BlockingConnection(f"amqp://{user}:{password}@127.0.0.1:{port}", allowed_mechs="PLAIN",
                                  timeout=timeout)  # fmt: skip
        landed = {k for k, p in procs.items() if peers_of(p, port) - before[k]}
        if landed == {worker}:
            if pinned:
                conn.create_sender(PIN)
            return conn
        conn.close()
    raise AssertionError(f"no connection landed on worker {worker}")


def publish(conn: BlockingConnection, queue: str, bodies: list[str]) -> None:
    sender = conn.create_sender(f"/queues/{queue}")
    for body in bodies:
        sender.send(Message(body=body, durable=True))  # waits for the outcome; raises unless accepted
    sender.close()


def consume(conn: BlockingConnection, queue: str, n: int) -> list[str]:
    receiver = conn.create_receiver(f"/queues/{queue}", credit=min(n, 100))
    got = []
    for _ in range(n):
        got.append(receiver.receive(timeout=10).body)
        receiver.accept()
    receiver.close()
    return got


def scrape(node) -> dict[str, float]:
    """The node's aggregated /metrics page: each series by name and labels."""
    port = int(re.search(r"metrics=(\d+)", node.banner).group(1))
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {line.rpartition(" ")[0]: float(line.rpartition(" ")[2]) for line in text.splitlines()
            if line and not line.startswith("#")}  # fmt: skip


def placement(data_dir) -> dict[str, int]:
    """The node's map of classic queue name -> worker (node/workers/slots.py)."""
    with open(os.path.join(data_dir, "workers", "placement")) as f:
        return {name: worker for _, name, worker in json.load(f)}


def six_queues_on_three_workers(start, data_dir, messages: int):
    """A node of 3 workers (`start`: broker_process_factory) with durable queues q0..q5, two on
    each worker, each holding `messages` messages "qN-j"; the node, and the map. Its HTTP and
    metrics ports are fixed: a worker 0 started again listens on the same ones."""
    http, metrics = free_ports(2)
    node = start(data_dir, extra_args=["--workers", "3", "--http-port", str(http), "--metrics-port", str(metrics)])
    for i in range(6):
        request_json(f"http://127.0.0.1:{node.http_port}/api/queues/%2F/q{i}", "PUT", "Basic Z3Vlc3Q6Z3Vlc3Q=",
                     {"durable": True})  # fmt: skip
    places = placement(str(data_dir))
    assert sorted(places.values()) == [0, 0, 1, 1, 2, 2]
    conn = connect_on(node.proc.pid, node.port, 0, pinned=True, count=3)
    for name in places:
        publish(conn, name, [f"{name}-{j}" for j in range(messages)])
    conn.close()
    return node, places
