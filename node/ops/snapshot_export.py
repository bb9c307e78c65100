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
    from node.cluster.cluster import Cluster

LIST, READ = "snapshots.list", "snapshots.read"
CHUNK = 256 * 1024
_NAME = re.compile(r"^snapshots-\d+\.ndjson$")  # nothing else may be read: no paths


class SnapshotError(Exception):
    status = 404


def _directory(data_dir: str) -> str:
    return os.path.join(data_dir, SNAPSHOT_DIR)


def local_files(data_dir: str) -> list[dict]:
    return [{"name": os.path.basename(p), "size": os.path.getsize(p)} for p in snapshot_files(_directory(data_dir))]


def local_chunk(data_dir: str, name: str, offset: int) -> dict:
    if not _NAME.match(name) or offset < 0:
        raise SnapshotError(f"no snapshot file {name!r}")
    try:
        with open(os.path.join(_directory(data_dir), name), "rb") as f:
            f.seek(offset)
            data = f.read(CHUNK)
    except FileNotFoundError:
        raise SnapshotError(f"no snapshot file {name!r}") from None
    return {"data": base64.b64encode(data).decode(), "eof": len(data) < CHUNK}


def register(cluster: Cluster, data_dir: str) -> None:
    """Serve the other members' LIST and READ calls for the files under `data_dir`."""

    async def list_call(peer: str, args: dict) -> dict:
        return {"files": local_files(data_dir)}

    async def read_call(peer: str, args: dict) -> dict:
        return local_chunk(data_dir, str(args.get("name", "")), int(args.get("offset", 0)))

    cluster.calls[LIST] = list_call
    cluster.calls[READ] = read_call


async def files_of(cluster: Cluster, data_dir: str, member: str) -> list[dict]:
    if member == cluster.node_id:
        return local_files(data_dir)
    return (await cluster.call(member, LIST, {}))["files"]


async def chunk_of(cluster: Cluster, data_dir: str, member: str, name: str, offset: int) -> dict:
    if member == cluster.node_id:
        return local_chunk(data_dir, name, offset)
    return await cluster.call(member, READ, {"name": name, "offset": offset})
