"""A node's audit timeline, for the console's audit view (Warren's own route):

    GET /api/audit/timeline   ?minutes= (the window, 1 to 10080, default 60)
                              ?node= (a member's node name or cluster address; default this node)

What a node's own cluster-state snapshots (node/ops/state_snapshot.py,
docs/snapshot-schema.md) show over the newest `minutes`: whom it reached, the
leader and term of each Raft group it is a member of, its version, restarts,
feature flags enabled and alarms (node/ops/audit_timeline.py). The member that
holds the files computes it, in a worker thread and within bounds
(node/ops/timeline_service.py); another member's is asked for over the cluster
transport. Members are named by node name here, where the names are known.
`warren audit report` reads every node's files together with Spark; this is
one node's view, live.
"""

from __future__ import annotations

from aiohttp import web

from node.cluster.cluster import ClusterError, ClusterUnavailable
from node.http.route_kit import (
    MONITOR,
    ApiError,
    access,
    api_of,
    bad_request,
    json_response,
    member_address,
    member_name,
    not_found,
)
from node.ops import audit_timeline, timeline_service

DEFAULT_MINUTES = 60


@access(MONITOR)
async def timeline(request: web.Request) -> web.Response:
    node = api_of(request).node
    try:
        minutes = timeline_service.window_minutes(request.query.get("minutes", DEFAULT_MINUTES))
    except timeline_service.BadWindow as e:
        raise bad_request(str(e)) from None
    member = None
    asked = request.query.get("node")
    if asked:
        member = member_address(node, asked)
        if node.cluster is None or member not in node.cluster.members():
            raise not_found(f"{asked} is not a cluster member")
    try:
        cfg = node.config
        out = await timeline_service.of_member(node.cluster, cfg.data_dir, cfg.snapshot_interval, member, minutes)
    except timeline_service.TimelineBusy as e:
        raise ApiError(503, "service_unavailable", str(e)) from None
    except ClusterUnavailable as e:
        raise ApiError(503, "cluster_unavailable", f"{asked} did not answer: {e}") from None
    except ClusterError as e:
        raise ApiError(503, "service_unavailable", str(e)) from None
    out = audit_timeline.named(out, lambda m: member_name(node, m))
    out["minutes"] = minutes
    return json_response(request, out)


ROUTES = [("GET", "/api/audit/timeline", timeline)]
