"""Several NodeTransports in one process on 127.0.0.1, and what the transport tests share."""

from __future__ import annotations

import asyncio
import contextlib

from raft.proto import cluster_pb2
from raft.transport import GroupTransport, NodeTransport, TransportOptions

SECRET = "test-cluster-secret"
Frame = cluster_pb2.Frame
Envelope = cluster_pb2.Envelope
QUIET = TransportOptions(ping_interval=30.0, dead_after=90.0)  # no pings mid-test
FAST = TransportOptions(backoff_initial=0.01, backoff_max=0.2)


async def until(predicate, timeout: float = 5.0, what: str = "condition") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"{what} never became true")
        await asyncio.sleep(0.002)


@contextlib.asynccontextmanager
async def nodes(n: int, *, secrets=None, options: TransportOptions = FAST, connect: bool = True, **kw):
    ts = [
        NodeTransport(listen="127.0.0.1:0", secret=(secrets or [SECRET] * n)[i], options=options, **kw)
        for i in range(n)
    ]
    try:
        for t in ts:
            await t.start()
        if connect:
            for t in ts:
                for u in ts:
                    if u is not t:
                        t.add_peer(u.node_id)
            await until(lambda: all(t.is_connected(u.node_id) for t in ts for u in ts if u is not t), what="all up")
        yield ts
    finally:
        for t in ts:
            await t.close()


def collect(t: NodeTransport) -> list:
    got = []
    t.on_node_message = lambda peer, channel, payload: got.append((peer, channel, payload, t.epoch_from(peer)))
    return got


class Recorder:
    """Stands in for pysyncobj: the callbacks of one GroupTransport."""

    def __init__(self, gt: GroupTransport) -> None:
        self.gt = gt
        self.messages: list = []
        self.events: list = []
        gt.setOnMessageReceivedCallback(lambda node, m: self.messages.append((node.id, m)))
        gt.setOnNodeDisconnectedCallback(lambda node: self.events.append(("down", node.id)))
        gt.setOnNodeConnectedCallback(lambda node: self.events.append(("up", node.id)))


def group(t: NodeTransport, name: str, peers) -> Recorder:
    return Recorder(GroupTransport(t, name, t.node_id, [p.node_id for p in peers]))


def vote(term: int) -> dict:
    return {"type": "request_vote", "term": term, "last_log_index": 1, "last_log_term": 0}
