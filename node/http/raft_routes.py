"""Every replicated group this node knows, for the console's Raft page (Warren's own route):

    GET /api/raft/groups    ?page=, ?page_size= (at most 500, default 100), ?name= (a part of
                            the group's, vhost's or queue's name, case-insensitive), ?type=
                            (metadata, quorum or stream)

One item per group: the metadata group, each quorum queue's Raft group and each
replicated stream (its leader, replicas and epoch live in the metadata: a stream
is no Raft group, but the page shows its replicas the same way, its epoch as the
term and its committed offset as the commit index). The answer is always one
page, ordered by type (metadata first), vhost and name: the groups are listed by
name from the metadata first, and only the page's are read, so a node with
thousands of quorum queues answers as fast as with ten.

What a row can say depends on where it is read. Every node knows each group's
members from the metadata; a group this node is a member of (`local`) adds its
own role, term, commit and applied index. Only the leader knows how far each
member has matched its log: `match_index` and `lag` (the leader's commit index
minus the member's match index, never negative) come from this node when it
leads, else from the leader, asked once per leader for the page's groups
(node/ops/raft_progress.py, with `leader_term` and `leader_commit_index` as it
answered); a leader that does not answer within a second leaves them null. A
stream's leader is asked the same for its replicas' ends.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from node.http.route_kit import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    MONITOR,
    ApiError,
    access,
    api_of,
    bad_request,
    json_response,
    member_name,
)
from node.ops import raft_progress
from node.vhosts.quorum_groups import group_name
from raft.status import GroupStatus, Role

METADATA = "metadata"  # node/cluster/hosting.py's METADATA
TYPES = ("metadata", "quorum", "stream")
_TYPE_ORDER = {t: i for i, t in enumerate(TYPES)}


def _positive(request: web.Request, name: str, default: int, most: int | None = None) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise bad_request(f"'{name}' must be an integer") from None
    if value < 1 or (most is not None and value > most):
        limit = f" and at most {most}" if most is not None else ""
        raise ApiError(400, "invalid_pagination_parameters", f"'{name}' must be at least 1{limit}")
    return value


def _listing(node: Any) -> list[tuple[str, str, str]]:
    """(type, vhost, queue) of every group, from the metadata ("" for the metadata group's)."""
    out = [(METADATA, "", "")] if node.cluster is not None else []
    for vhost, vh in node.metadata.state.vhosts.items():
        for name, record in vh.queues.items():
            if record.type == "quorum":
                out.append(("quorum", vhost, name))
        out.extend(("stream", vhost, name) for name in vh.streams)
    return out


def _matches(entry: tuple[str, str, str], needle: str) -> bool:
    kind, vhost, queue = entry
    name = group_name(vhost, queue) if kind == "quorum" else (METADATA if kind == METADATA else queue)
    return any(needle in part.lower() for part in (name, vhost, queue))


@access(MONITOR)
async def raft_groups(request: web.Request) -> web.Response:
    node = api_of(request).node
    page = _positive(request, "page", 1)
    size = _positive(request, "page_size", DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
    kind = request.query.get("type")
    if kind is not None and kind not in TYPES:
        raise bad_request(f"'type' must be one of {', '.join(TYPES)}")
    needle = request.query.get("name", "").lower()
    listing = _listing(node)
    total = len(listing)
    chosen = [e for e in listing if (kind is None or e[0] == kind) and (not needle or _matches(e, needle))]
    chosen.sort(key=lambda e: (_TYPE_ORDER[e[0]], e[1], e[2]))
    pages = -(-len(chosen) // size)
    if page > max(pages, 1):
        raise ApiError(
            400, "page_out_of_range", f"Page out of range, page: {page} page size: {size}, len: {len(chosen)}"
        )
    items = [_describe(node, *e) for e in chosen[(page - 1) * size : page * size]]
    await _lag_from_leaders(node, items)
    return json_response(request, {"total_count": total, "filtered_count": len(chosen), "item_count": len(items),
                                   "page": page, "page_size": size, "page_count": pages, "items": items})  # fmt: skip


async def _lag_from_leaders(node: Any, items: list[dict]) -> None:
    """Fills in the members' match index and lag of the groups and streams another
    member leads, as that leader reports them (node/ops/raft_progress.py)."""
    cluster = node.cluster
    if cluster is None:
        return
    wanted: dict[str, dict[str, list]] = {}
    for row in items:
        leader = next((m["address"] for m in row["members"] if m["leader"]), None)
        if leader is None or leader == node.node_id:
            continue
        ask = wanted.setdefault(leader, {"groups": [], "streams": []})
        if row["type"] == "stream":
            ask["streams"].append([row["vhost"], row["queue"]])
        else:
            ask["groups"].append(row["name"])
    if not wanted:
        return
    groups, streams = await raft_progress.from_leaders(cluster, wanted)
    for row in items:
        p = streams.get((row["vhost"], row["queue"])) if row["type"] == "stream" else groups.get(row["name"])
        if p is not None:
            row["leader_term"], row["leader_commit_index"] = p["term"], p["commit_index"]
            _fill(row["members"], p)


def _fill(members: list[dict], p: dict) -> None:
    """Each member's match index and lag from a leader's progress."""
    for m in members:
        match = p["match_index"].get(m["address"])
        if match is not None:
            m["match_index"], m["lag"] = match, max(0, p["commit_index"] - match)


# ---------------------------------------------------------------- one group


def _describe(node: Any, kind: str, vhost: str, queue: str) -> dict:
    if kind == METADATA:
        cluster = node.cluster
        group = cluster.groups.get(METADATA)
        st = group.status() if group is not None else None
        members = cluster.members()
        return _raft_row(node, METADATA, kind, None, None, members, st, None)
    record = node.metadata.state.queue(vhost, queue)
    if kind == "quorum":
        name = group_name(vhost, queue)
        group = node.cluster.groups.get(name) if node.cluster is not None else None
        st = group.status() if group is not None else None
        members = list(record.replicas) if record is not None else []
        return _raft_row(node, name, kind, vhost, queue, members, st, record.leader if record is not None else None)
    return _stream_row(node, vhost, queue)


def _raft_row(node: Any, name: str, kind: str, vhost: str | None, queue: str | None, members: list[str],
              st: GroupStatus | None, recorded_leader: str | None) -> dict:  # fmt: skip
    """A Raft group's row; `st` is this node's view when it is a member, `recorded_leader`
    the leader the metadata names (all a node outside the group knows)."""
    me = node.node_id
    leader = st.leader if st is not None else recorded_leader
    leading = st is not None and st.role is Role.LEADER
    rows = []
    for m in members:
        match = None
        if leading:
            match = st.last_index if m == me else st.match_index.get(m)
        elif st is not None and m == me:
            match = st.last_index
        lag = max(0, st.commit_index - match) if leading and match is not None else None
        rows.append(_member(node, m, leader, match, lag))
    return {
        "name": name, "type": kind, "vhost": vhost, "queue": queue, "local": st is not None,
        "role": st.role.value if st is not None else None,
        "leader": member_name(node, leader) if leader is not None else None,
        "term": st.term if st is not None else None,
        "commit_index": st.commit_index if st is not None else None,
        "last_applied": st.last_applied if st is not None else None,
        "last_index": st.last_index if st is not None else None,
        "members": rows,
    }  # fmt: skip


def _stream_row(node: Any, vhost: str, name: str) -> dict:
    """A replicated stream: the metadata's leader, replicas and epoch; its leader's
    StreamQueue (queues/stream/leader.py) knows each replica's durable end, a
    replica here (queues/stream/replica.py) its own."""
    record = node.metadata.state.stream(vhost, name)
    me = node.node_id
    leader = record.leader if record is not None else None
    queue = node.vhosts[vhost].queues.get(name) if vhost in node.vhosts else None
    leading = raft_progress.stream_progress(queue, me)
    replica = getattr(queue, "replica", None)  # StreamFollower: this node's copy
    members = [_member(node, m, leader, None, None) for m in (record.replicas if record is not None else ())]
    committed = own_end = None
    if leading is not None:
        committed, own_end = leading["commit_index"], leading["last_index"]
        _fill(members, leading)
    elif replica is not None:
        committed, own_end = replica.committed_end, replica.log.next_offset
        for m in members:
            if m["self"]:
                m["match_index"] = own_end
    local = leading is not None or replica is not None
    return {
        "name": name, "type": "stream", "vhost": vhost, "queue": name, "local": local,
        "role": ("leader" if leading is not None else "follower") if local else None,
        "leader": member_name(node, leader) if leader is not None else None,
        "term": record.epoch if record is not None else None,
        "commit_index": committed, "last_applied": None, "last_index": own_end,
        "members": members,
    }  # fmt: skip


def _member(node: Any, member: str, leader: str | None, match: int | None, lag: int | None) -> dict:
    cluster = node.cluster
    me = node.node_id
    return {"node": member_name(node, member), "address": member, "leader": member == leader, "self": member == me,
            "reachable": member == me or (cluster is not None and cluster.is_reachable(member)),
            "match_index": match, "lag": lag}  # fmt: skip


ROUTES = [("GET", "/api/raft/groups", raft_groups)]
