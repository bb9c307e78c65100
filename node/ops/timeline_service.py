"""Audit timelines (node/ops/audit_timeline.py) of this node and of any member: the
member that holds the snapshot files computes its own, and answers another node's
"audit.timeline" call over the cluster transport (node messages, node/cluster/rpc.py),
so a console on one node draws every node's timeline and no file crosses the network.

The files are read in a worker thread, never on the event loop, at most MAX_RECORDS
records and MAX_BYTES of file per timeline, and at most CONCURRENT timelines at a time
per node (its event loop); up to MAX_WAITING more wait their turn (a console asks
every member at once, several consoles may be open), beyond them TimelineBusy (the
caller answers 503 and the user retries).
"""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from typing import TYPE_CHECKING

from audit.schema import SNAPSHOT_DIR
from node.ops import audit_timeline

if TYPE_CHECKING:
    from node.cluster.cluster import Cluster

CALL = "audit.timeline"
MAX_MINUTES = 7 * 24 * 60
MAX_RECORDS = 5000  # 7 hours at the default 5 s period
MAX_BYTES = 64 * 1024 * 1024
CONCURRENT = 2
MAX_WAITING = 8
CALL_TIMEOUT = 30.0  # seconds another member may take to answer


class _Gate:
    """CONCURRENT timelines at a time on one loop, MAX_WAITING more in line."""

    def __init__(self) -> None:
        self.slots = asyncio.Semaphore(CONCURRENT)
        self.waiting = 0


_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Gate] = weakref.WeakKeyDictionary()  # per node


class TimelineBusy(Exception):
    status = 503  # what the cluster call's error reply carries

    def __init__(self) -> None:
        super().__init__("audit timelines are being computed, try again later")


class BadWindow(ValueError):
    status = 400


def window_minutes(raw: object) -> int:
    """The window, 1 to MAX_MINUTES minutes; BadWindow otherwise."""
    try:
        minutes = int(raw)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise BadWindow("'minutes' must be an integer") from None
    if isinstance(raw, bool) or not 1 <= minutes <= MAX_MINUTES:
        raise BadWindow(f"'minutes' must be between 1 and {MAX_MINUTES}")
    return minutes


async def local(data_dir: str, minutes: int, interval: float) -> dict:
    """This node's timeline over the last `minutes`, members named by their ids;
    `interval` is its setting snapshot_interval (0: it writes none), shown with it."""
    loop = asyncio.get_running_loop()
    gate = _gates.setdefault(loop, _Gate())
    if gate.slots.locked() and gate.waiting >= MAX_WAITING:
        raise TimelineBusy()
    gate.waiting += 1
    try:
        await gate.slots.acquire()
    finally:
        gate.waiting -= 1
    try:
        directory = os.path.join(data_dir, SNAPSHOT_DIR)
        now_ms = int(time.time() * 1000)
        out = await loop.run_in_executor(
            None, audit_timeline.timeline, directory, now_ms, minutes * 60_000, MAX_RECORDS, MAX_BYTES)  # fmt: skip
    finally:
        gate.slots.release()
    out["snapshot_interval"] = interval
    return out


def register(cluster: Cluster, data_dir: str, interval: float) -> None:
    """Serve the other members' CALL for the files under `data_dir` (`interval`: snapshot_interval)."""

    async def timeline_call(peer: str, args: dict) -> dict:
        return await local(data_dir, window_minutes(args.get("minutes")), interval)

    cluster.calls[CALL] = timeline_call


async def of_member(cluster: Cluster | None, data_dir: str, interval: float, member: str | None,
                    minutes: int) -> dict:  # fmt: skip
    """`member`'s timeline (None or this node's id: this node's, whose snapshot_interval
    is `interval`); raises the cluster's errors (ClusterError) when another member cannot answer."""
    if cluster is None or member is None or member == cluster.node_id:
        return await local(data_dir, minutes, interval)
    return await cluster.call(member, CALL, {"minutes": minutes}, timeout=CALL_TIMEOUT)
