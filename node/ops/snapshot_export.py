"""`warren ctl export_snapshots DIR`: the cluster-state snapshot files of
every member, gathered through any one node.

The node asked over HTTP reads its own files and asks each other member over
the cluster transport (node messages, node/cluster/rpc.py): "snapshots.list"
names a member's files, "snapshots.read" returns one chunk of one file
(base64 in the JSON reply, CHUNK bytes at most), so a large file travels in
pieces that fit the transport's message limit.
"""

from __future__ import annotations

import base64
import os
import re
from typing import TYPE_CHECKING

from node.ops.state_snapshot import SNAPSHOT_DIR, snapshot_files

if TYPE_CHECKING:
    from node.broker import Broker

LIST, READ = "snapshots.list", "snapshots.read"
CHUNK = 256 * 1024
_NAME = re.compile(r"^snapshots-\d+\.ndjson$")  # nothing else may be read: no paths


class SnapshotError(Exception):
    status = 404


def _directory(broker: Broker) -> str:
    return os.path.join(broker.config.data_dir, SNAPSHOT_DIR)


def local_files(broker: Broker) -> list[dict]:
    return [{"name": os.path.basename(p), "size": os.path.getsize(p)} for p in snapshot_files(_directory(broker))]


def local_chunk(broker: Broker, name: str, offset: int) -> dict:
    if not _NAME.match(name) or offset < 0:
        raise SnapshotError(f"no snapshot file {name!r}")
    try:
        with open(os.path.join(_directory(broker), name), "rb") as f:
            f.seek(offset)
            data = f.read(CHUNK)
    except FileNotFoundError:
        raise SnapshotError(f"no snapshot file {name!r}") from None
    return {"data": base64.b64encode(data).decode(), "eof": len(data) < CHUNK}


def register(broker: Broker) -> None:
    async def list_call(peer: str, args: dict) -> dict:
        return {"files": local_files(broker)}

    async def read_call(peer: str, args: dict) -> dict:
        return local_chunk(broker, str(args.get("name", "")), int(args.get("offset", 0)))

    broker.cluster.calls[LIST] = list_call
    broker.cluster.calls[READ] = read_call


async def files_of(broker: Broker, member: str) -> list[dict]:
    if member == broker.node_id:
        return local_files(broker)
    return (await broker.cluster.call(member, LIST, {}))["files"]


async def chunk_of(broker: Broker, member: str, name: str, offset: int) -> dict:
    if member == broker.node_id:
        return local_chunk(broker, name, offset)
    return await broker.cluster.call(member, READ, {"name": name, "offset": offset})
