"""RPC over a broker (issue 20): round trips/s and p50/p99 round-trip time
for N requesters against one responder, and broker memory per idle
requester link.

Each requester sends one request, waits for its reply, and sends the next
(closed loop, one request in flight each). The responder consumes a request
queue and replies to each request's reply-to. Two ways to get replies back:

- `volatile`: Direct Reply-To (Warren; RabbitMQ 4.2+): the requester's
  reply link is a dynamic receiver with capability rabbitmq:volatile-queue,
  the responder replies through one anonymous sender (`to` = reply address).
- `classic`: a classic reply queue per requester, declared by attaching to
  the v1 address `/queue/reply-...` (both Warren and RabbitMQ 3.10, which has
  no volatile queues and no anonymous sender); the responder keeps a sender
  per reply address.

Every link is pre-settled (at most once, like Direct Reply-To itself), so
the figures are about routing, not about confirms. Brokers: `warren` (one
node), `warren2` (two nodes: responder and request queue on node 0,
requesters on node 1, so every request and every reply crosses nodes) and
`rabbitmq` (3.10, bench/rabbitmq.py, classic only).

    .venv/bin/python bench/rpc.py --requesters 1,100,10000 --seconds 10
    .venv/bin/python bench/rpc.py --requesters "" --memory 100000   # memory per idle requester
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests" / "support"))

from cluster_procs import ClusterProcesses  # noqa: E402
from rpc_client import Client  # noqa: E402

from amqp.message import Message  # noqa: E402

PER_CONNECTION = 200  # requesters per connection (one session, links under handle-max 255)
REQUESTS = "/queue/rpc-requests"
RESPONDER_CREDIT = 2000
TAG = b"\x00"


class Responder:
    def __init__(self, client: Client, session: Any, anonymous: bool) -> None:
        self.client, self.session, self.anonymous = client, session, anonymous
        self.relay: Any = None
        self.senders: dict[str, Any] = {}
        self.backlog: list[tuple[str, bytes]] = []
        self.requests: Any = None
        self._links = 1
        self._attaching = asyncio.Lock()

    async def start(self) -> None:
        if self.anonymous:
            self.relay = await self.client.sender(self.session, None, "responder-relay")
            self.relay.on_credit = self._drain
        self.requests, _ = await self.client.receiver(self.session, REQUESTS, "responder-requests", self._on_request,
                                                      RESPONDER_CREDIT)  # fmt: skip

    def _on_request(self, payload: bytes) -> None:
        props = Message.from_bytes(payload).properties
        reply_to = props.reply_to
        if self.anonymous:
            reply = Message.build(b"reply", properties={"to": reply_to, "correlation_id": props.message_id})
        else:
            reply = Message.build(b"reply", properties={"correlation_id": props.message_id})
        self._send(reply_to, bytes(reply))
        link = self.requests
        if link.link_credit < RESPONDER_CREDIT // 2:
            link.flow(link_credit=RESPONDER_CREDIT)
        self.client.flush_soon()

    def _send(self, reply_to: str, payload: bytes) -> None:
        if self.anonymous:
            if self.relay.link_credit > 0 and not self.backlog:
                self.relay.send(TAG, payload, settled=True)
            else:
                self.backlog.append((reply_to, payload))
            return
        attaching = reply_to not in self.senders
        link = self.senders.get(reply_to)
        if link is None or link.link_credit <= 0:
            self.backlog.append((reply_to, payload))
            if attaching:
                self.senders[reply_to] = None  # attaching
                asyncio.get_running_loop().create_task(self._attach(reply_to))
            return
        link.send(TAG, payload, settled=True)

    async def _attach(self, reply_to: str) -> None:
        async with self._attaching:  # one at a time: a session's handles run to 255
            self._links += 1
            if self._links % PER_CONNECTION == 0:
                self.session = await self.client.session()
            link = await self.client.sender(self.session, reply_to, f"responder-{len(self.senders)}")
        link.on_credit = self._drain
        self.senders[reply_to] = link
        self._drain()

    def _drain(self) -> None:
        backlog, self.backlog = self.backlog, []
        for reply_to, payload in backlog:
            self._send(reply_to, payload)
        self.client.flush_soon()


class Requester:
    __slots__ = ("client", "sender", "link", "request", "sent_at", "stats", "pending")

    def __init__(self, client: Client, sender: Any, stats: Stats) -> None:
        self.client, self.sender, self.stats = client, sender, stats
        self.link: Any = None
        self.request = b""
        self.sent_at = 0.0
        self.pending: list[Requester] | None = None

    def on_reply(self, payload: bytes) -> None:
        self.stats.done(time.perf_counter() - self.sent_at)
        if self.link.link_credit < 5:
            self.link.flow(link_credit=10)
        if self.stats.running:
            self.send()

    def send(self) -> None:
        self.sent_at = time.perf_counter()
        sender = self.sender
        if sender.link_credit > 0:
            sender.send(TAG, self.request, settled=True)
            self.client.flush_soon()
        else:
            sender.waiting.append(self)


class Stats:
    def __init__(self) -> None:
        self.running = False
        self.measuring = False
        self.count = 0
        self.rtts: list[float] = []

    def done(self, rtt: float) -> None:
        if self.measuring:
            self.count += 1
            if len(self.rtts) < 200_000:
                self.rtts.append(rtt)


async def open_requesters(port: int, n: int, volatile: bool, stats: Stats, run: str) -> tuple[list, list]:
    clients, requesters = [], []
    ids = itertools.count()
    for start in range(0, n, PER_CONNECTION):
        client = await Client.connect(port)
        clients.append(client)
        session = await client.session()
        sender = await client.sender(session, REQUESTS, "requests")
        sender.waiting = []

        def resend(sender=sender, client=client) -> None:
            waiting, sender.waiting = sender.waiting, []
            for r in waiting:
                r.send()

        sender.on_credit = resend
        batch = []
        for _ in range(min(PER_CONNECTION, n - start)):
            i = next(ids)
            r = Requester(client, sender, stats)
            address = None if volatile else f"/queue/reply-{run}-{i}"
            batch.append((r, client.receiver(session, address, f"reply-{i}", r.on_reply, 10, volatile=volatile)))
        for r, attaching in batch:
            r.link, reply_to = await attaching
            r.request = bytes(Message.build(b"request", properties={"message_id": f"{run}-{id(r)}",
                                                                    "reply_to": reply_to}))  # fmt: skip
            requesters.append(r)
    return clients, requesters


async def load(req_port: int, resp_port: int, n: int, volatile: bool, seconds: float, warmup: float) -> dict:
    run = os.urandom(4).hex()
    stats = Stats()
    responder_client = await Client.connect(resp_port)
    responder = Responder(responder_client, await responder_client.session(), anonymous=volatile)
    await responder.start()
    opened = time.perf_counter()
    clients, requesters = await open_requesters(req_port, n, volatile, stats, run)
    attach_s = time.perf_counter() - opened
    stats.running = True
    for r in requesters:
        r.send()
    await asyncio.sleep(warmup)
    stats.measuring = True
    started = time.perf_counter()
    await asyncio.sleep(seconds)
    stats.measuring = False
    elapsed = time.perf_counter() - started
    stats.running = False
    await asyncio.sleep(0.5)  # the replies in flight come home
    for c in [*clients, responder_client]:
        c.close()
    rtts = sorted(stats.rtts)
    return {
        "requesters": n,
        "mode": "volatile" if volatile else "classic",
        "round_trips_per_s": round(stats.count / elapsed),
        "p50_ms": round(1000 * rtts[len(rtts) // 2], 2) if rtts else None,
        "p99_ms": round(1000 * rtts[int(len(rtts) * 0.99)], 2) if rtts else None,
        "attach_s": round(attach_s, 2),
    }


def tree_rss(pid: int) -> int:
    """Resident memory of a process and its children (RabbitMQ: the start script, beam.smp, helpers)."""
    root = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])


async def idle_memory(port: int, pid: int, n: int, volatile: bool) -> dict:
    """RSS growth of the broker per idle requester (reply link with credit
    granted, no traffic): a volatile queue, or a classic reply queue."""
    warm_clients, _ = await open_requesters(port, 50, volatile, Stats(), "warm")
    before = tree_rss(pid)
    opened = time.perf_counter()
    clients, _ = await open_requesters(port, n, volatile, Stats(), os.urandom(4).hex())
    attach_s = time.perf_counter() - opened
    await asyncio.sleep(1.0)
    after = tree_rss(pid)
    for c in clients + warm_clients:
        c.close()
    return {"idle_requesters": n, "mode": "volatile" if volatile else "classic", "connections": len(clients),
            "rss_before_mib": round(before / 2**20, 1), "rss_after_mib": round(after / 2**20, 1),
            "per_requester_bytes": round((after - before) / n), "attach_s": round(attach_s, 1)}  # fmt: skip


def warren_cluster(n: int) -> ClusterProcesses:
    root = Path(tempfile.mkdtemp(prefix="warren-rpc-bench-"))
    cluster = ClusterProcesses(root, n, extra_args=["--idle-timeout", "0"])
    cluster.start(60)
    return cluster


def rabbit_node() -> Any:
    from rabbitmq import RabbitNode  # noqa: PLC0415 - only when RabbitMQ is measured

    node = RabbitNode(base_dir=tempfile.mkdtemp(prefix="rabbit-rpc-bench-"))
    node.start()
    return node



def _report(results: list, r: dict, broker: str) -> None:
    """One result line: printed at once (runs are long) and kept for --json."""
    r["broker"] = broker
    r["load_average"] = os.getloadavg()[0]
    print(json.dumps(r), flush=True)
    results.append(r)

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requesters", default="1,100,10000")
    ap.add_argument("--brokers", default="warren,warren2,rabbitmq")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--memory", type=int, default=0, help="memory per idle volatile requester, with this many")
    ap.add_argument("--classic-memory", type=int, default=5000, help="with --memory: classic reply queues to open")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    results: list[dict] = []
    print(f"load average before: {os.getloadavg()}")

    if args.memory:
        for broker, volatile in [("warren", True), ("warren", False), ("rabbitmq", False)]:
            if broker not in args.brokers.split(","):
                continue
            if broker == "warren":
                cluster = warren_cluster(1)
                port, pid, stop = cluster[0].amqp_port, cluster[0].proc.pid, cluster.close
            else:
                node = rabbit_node()
                port, pid, stop = node.amqp_port, node.proc.pid, node.stop
            try:
                memory = args.memory if volatile else args.classic_memory
                _report(results, asyncio.run(idle_memory(port, pid, memory, volatile)), broker)
            finally:
                stop()
    counts = [int(x) for x in args.requesters.split(",") if x]
    for broker in [b for b in args.brokers.split(",") if b] if counts else []:
        if broker in ("warren", "warren2"):
            cluster = warren_cluster(1 if broker == "warren" else 2)
            resp_port, req_port = cluster[0].amqp_port, cluster[len(cluster) - 1].amqp_port
            modes, stop = (True, False), cluster.close
        else:
            node = rabbit_node()
            resp_port = req_port = node.amqp_port
            modes, stop = (False,), node.stop
        try:
            for volatile in modes:
                for n in counts:
                    _report(results, asyncio.run(load(req_port, resp_port, n, volatile, args.seconds, args.warmup)), broker)
        finally:
            stop()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
