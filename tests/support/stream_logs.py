"""Stream helpers for the tests on `warren server` processes (tests/support/cluster_procs.py):
declaring a stream over HTTP, finding its leader, and reading each node's copy straight
from its data directory (the segment files, parsed with queues/stream/chunk.py), so a
test sees what each node has on disk, not what a proxy reports."""

from __future__ import annotations

import hashlib
from pathlib import Path

from cluster_procs import HttpError

from amqp.message import Message as WarrenMessage
from queues.stream.chunk import HEADER, ChunkHeader, decode_records


def url(node) -> str:
    return f"amqp://guest:guest@127.0.0.1:{node.amqp_port}"


def declare(cluster, i: int, name: str, **arguments) -> None:
    cluster[i].http("PUT", f"/api/queues/%2F/{name}", {"durable": True,
                                                       "arguments": {"x-queue-type": "stream", **arguments}})  # fmt: skip


def two_replica_stream(cluster, name: str) -> tuple[int, int, int]:
    """Declares `name` on node 0 with 2 replicas: (leader, the other replica, the node without a copy)."""
    declare(cluster, 0, name, **{"x-initial-cluster-size": 2})
    leader = cluster.wait_for(lambda: leader_of(cluster, name), 10, "the stream's leader")
    members = info(cluster[leader], name)["members"]
    replica = next(n.index for n in cluster.nodes if n.id in members and n.index != leader)
    outsider = next(n.index for n in cluster.nodes if n.id not in members)
    return leader, replica, outsider


def info(node, name: str) -> dict | None:
    try:
        return node.by_address(node.http("GET", f"/api/queues/%2F/{name}"))
    except (HttpError, OSError):
        return None


def leader_of(cluster, name: str) -> int | None:
    """The index of the node whose stream says it leads (its own info has `members`)."""
    for node in cluster.nodes:
        if node.running:
            q = info(node, name)
            if q is not None and q.get("members") and q.get("leader") == node.id:
                return node.index
    return None


def chunks_on(node, name: str) -> list[tuple[int, int, int, bytes]]:
    """(first offset, count, CRC, data) of every intact chunk in the node's segment files, in order."""
    digest = hashlib.sha256(f"/\0{name}".encode()).hexdigest()[:32]
    directory = Path(node.data_dir) / "streams" / digest
    out = []
    for path in sorted(directory.glob("*.segment")):
        raw = path.read_bytes()
        pos = 0
        while pos + HEADER.size <= len(raw):
            header = ChunkHeader.parse(raw[pos:])
            if header is None or pos + header.size > len(raw):
                break
            data = raw[pos + HEADER.size + header.bloom_len : pos + header.size]
            out.append((header.first_offset, header.count, header.crc, data))
            pos += header.size
    return out


def ids_on(node, name: str) -> list[int]:
    ids = []
    for first, count, crc, data in chunks_on(node, name):
        header = ChunkHeader(0, 0, first, count, 0, len(data), crc)
        ids.extend(int(WarrenMessage.from_bytes(r.payload).message_id) for r in decode_records(header, data))
    return ids


def same_everywhere(nodes, name: str) -> bool:
    """The stream's chunks are alike on every one of `nodes` (a cluster: all of its nodes)."""
    logs = [[c[:3] for c in chunks_on(node, name)] for node in getattr(nodes, "nodes", nodes)]
    return bool(logs[0]) and all(log == logs[0] for log in logs)


def stream_dir(node, name: str) -> Path:
    return Path(node.data_dir) / "streams" / hashlib.sha256(f"/\0{name}".encode()).hexdigest()[:32]
