"""Management API handlers for quorum queue replicas, on RabbitMQ 4.2's paths:

    GET    /api/queues/quorum/{vhost}/{name}/status          each member's Raft state, as
                                                             `rabbitmq-queues quorum_status`
    POST   /api/queues/quorum/{vhost}/{name}/replicas/add     {"node": N}: add a replica
    DELETE /api/queues/quorum/{vhost}/{name}/replicas/delete  {"node": N}: remove one
    POST   /api/queues/quorum/replicas/on/{node}/grow         {"vhost_pattern", "queue_pattern",
                                                             "strategy": "all"}: add the node to
                                                             every quorum queue lacking it
    DELETE /api/queues/quorum/replicas/on/{node}/shrink       remove it from every one

A node is named by its node name (what `members` and `leader` list) or its
cluster address. Warren's own /api/quorum-queues routes
(node/http/cluster_routes.py) answer with the members; these answer 204, as
RabbitMQ's do.
"""

from __future__ import annotations

from aiohttp import web

from node.cluster.cluster import ClusterError
from node.http.route_kit import (
    ADMIN,
    MONITOR,
    ApiError,
    access,
    api_of,
    bad_request,
    json_response,
    member_address,
    member_name,
    no_content,
    not_found,
    read_body,
)
from node.vhosts.quorum_groups import group_name

_ANY = ".*"


def _member(request: web.Request, name: object) -> str:
    node = api_of(request).node
    if not isinstance(name, str) or not name:
        raise bad_request("'node' must be a non-empty string (a member's cluster address)")
    return member_address(node, name)


def _quorum_queue(request: web.Request) -> tuple[str, str]:
    vhost = api_of(request).vhost(request.match_info["vhost"])
    queue = vhost.queues.get(request.match_info["name"])
    if queue is None:
        raise not_found()
    if queue.type_name != "quorum":
        raise bad_request(f"queue '{queue.name}' in vhost '{vhost.name}' is not a quorum queue")
    return vhost.name, queue.name


async def _change(request: web.Request, vhost: str, name: str, member: str, add: bool) -> None:
    try:
        await api_of(request).node.quorum.change_member(vhost, name, member, add)
    except ClusterError as e:
        raise ApiError(503 if "majority" in str(e) else 400, "bad_request", str(e)) from None


@access(MONITOR)
async def quorum_status(request: web.Request) -> web.Response:
    """One row per member, with what this node knows of it: its own Raft state,
    and, when it leads, how far each follower has matched its log."""
    vhost, name = _quorum_queue(request)
    node = api_of(request).node
    queue = node.vhosts[vhost].queues[name]
    members = list(queue.info().get("members", ()))
    group = node.cluster.groups.get(group_name(vhost, name)) if node.cluster is not None else None
    st = group.status() if group is not None else None
    rows = []
    for member in members:
        row = {"Node Name": member_name(node, member), "Raft State": "unknown", "Membership": "voter", "Last Log Index": None,
               "Last Written": None, "Last Applied": None, "Commit Index": None, "Snapshot Index": None,
               "Term": None, "Machine Version": None}  # fmt: skip
        if st is not None and member == node.node_id:
            row.update({"Raft State": st.role.value, "Last Log Index": st.log_entries, "Last Written": st.log_entries,
                        "Last Applied": st.last_applied, "Commit Index": st.commit_index, "Term": st.term})  # fmt: skip
        elif st is not None and st.leader == node.node_id:
            row.update({"Raft State": "follower", "Last Written": st.match_index.get(member), "Term": st.term})
        rows.append(row)
    return json_response(request, rows)


@access(ADMIN)
async def add_replica(request: web.Request) -> web.Response:
    vhost, name = _quorum_queue(request)
    await _change(request, vhost, name, _member(request, (await read_body(request)).get("node")), True)
    return no_content()


@access(ADMIN)
async def delete_replica(request: web.Request) -> web.Response:
    vhost, name = _quorum_queue(request)
    await _change(request, vhost, name, _member(request, (await read_body(request)).get("node")), False)
    return no_content()


@access(ADMIN)
async def grow(request: web.Request) -> web.Response:
    body = await read_body(request)
    for key in ("vhost_pattern", "queue_pattern"):
        if body.get(key, _ANY) != _ANY:
            raise bad_request(f"'{key}' other than '.*' is not implemented by Warren: it grows every quorum queue")
    if body.get("strategy", "all") != "all":
        raise bad_request("'strategy' must be 'all' (Warren has no 'even')")
    results = await api_of(request).node.quorum.grow(_member(request, request.match_info["node"]))
    _failed(results)
    return no_content()


@access(ADMIN)
async def shrink(request: web.Request) -> web.Response:
    results = await api_of(request).node.quorum.shrink(_member(request, request.match_info["node"]))
    _failed(results)
    return no_content()


def _failed(results: list[dict]) -> None:
    errors = [f"{r['name']} (vhost {r['vhost']}): {r['error']}" for r in results if not r["ok"]]
    if errors:
        raise bad_request("not changed: " + "; ".join(errors))


_Q = "/api/queues/quorum/{vhost}/{name}"
ROUTES = [
    ("GET", f"{_Q}/status", quorum_status),
    ("POST", f"{_Q}/replicas/add", add_replica),
    ("DELETE", f"{_Q}/replicas/delete", delete_replica),
    ("POST", "/api/queues/quorum/replicas/on/{node}/grow", grow),
    ("DELETE", "/api/queues/quorum/replicas/on/{node}/shrink", shrink),
]
