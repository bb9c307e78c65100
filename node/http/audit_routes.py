"""The audit timeline of this node, for the console's audit view (Warren's own route):

    GET /api/audit/timeline   ?minutes= (the window, 1 to 10080, default 60)

What this node's own cluster-state snapshots (node/ops/state_snapshot.py,
docs/snapshot-schema.md) show over the newest `minutes`: whom it reached, the
leader and term of each Raft group it is a member of, its version, restarts,
feature flags enabled and alarms (node/ops/audit_timeline.py). The files are
read in a worker thread, never on the event loop, at most MAX_RECORDS records
and MAX_BYTES of file per request (`cut` says the window was longer), and at
most CONCURRENT requests at a time (503 beyond). `warren audit report` reads
every node's files together with Spark; this is one node's view, live.
"""

from __future__ import annotations

import asyncio
import os
import threading

from aiohttp import web

from audit.schema import SNAPSHOT_DIR
from node.http.route_kit import MONITOR, ApiError, access, api_of, bad_request, json_response, member_name
from node.ops import audit_timeline

DEFAULT_MINUTES, MAX_MINUTES = 60, 7 * 24 * 60
MAX_RECORDS = 5000  # 7 hours at the default 5 s period
MAX_BYTES = 64 * 1024 * 1024
CONCURRENT = 2
_slots = threading.BoundedSemaphore(CONCURRENT)  # a thread-safe count: shared by every node of the process


@access(MONITOR)
async def timeline(request: web.Request) -> web.Response:
    node = api_of(request).node
    raw = request.query.get("minutes", str(DEFAULT_MINUTES))
    try:
        minutes = int(raw)
    except ValueError:
        raise bad_request("'minutes' must be an integer") from None
    if not 1 <= minutes <= MAX_MINUTES:
        raise bad_request(f"'minutes' must be between 1 and {MAX_MINUTES}")
    if not _slots.acquire(blocking=False):
        raise ApiError(503, "service_unavailable", "audit timelines are being computed, try again later")
    try:
        directory = os.path.join(node.config.data_dir, SNAPSHOT_DIR)
        names = _names(node)
        out = await asyncio.get_running_loop().run_in_executor(
            None, audit_timeline.timeline, directory, node.now_ms(), minutes * 60_000, MAX_RECORDS, MAX_BYTES,
            lambda m: names.get(m, m))  # fmt: skip
    finally:
        _slots.release()
    out["snapshot_interval"] = node.config.snapshot_interval  # 0: this node writes none
    out["minutes"] = minutes
    return json_response(request, out)


def _names(node: object) -> dict[str, str]:
    """Member id -> node name, read here on the loop (the thread only reads files)."""
    cluster = getattr(node, "cluster", None)
    members = cluster.members() if cluster is not None else []
    return {m: member_name(node, m) for m in members}  # type: ignore[arg-type]


ROUTES = [("GET", "/api/audit/timeline", timeline)]
