"""How far each member of a replicated group has matched its leader's log, asked of the leader.

Only a group's leader knows its followers' match indexes (raft/status.py), and only a
replicated stream's leader its replicas' durable ends (queues/stream/leader.py). The
Raft groups route (node/http/raft_routes.py) shows them for every group on a page,
from any node: for the groups another member leads, it asks that member with one
"raft.progress" call (node messages, node/cluster/rpc.py) naming them, and the member
answers for those it leads now. A member that does not answer in CALL_TIMEOUT leaves
its groups' lag unknown; the page is not held up longer.

A progress is {term, commit_index, last_index, match_index: {member: index}}: for a
stream the epoch, the committed offset, the leader's log end and each replica's end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from raft.status import Role

if TYPE_CHECKING:
    from node.cluster.cluster import Cluster

CALL = "raft.progress"
MAX_ITEMS = 500  # per call: the route's largest page
CALL_TIMEOUT = 1.0  # seconds a leader may take to answer


class BadRequest(ValueError):
    status = 400


def group_progress(cluster: Cluster, name: str) -> dict | None:
    """Raft group `name`'s progress, if this node leads it."""
    group = cluster.groups.get(name)
    if group is None:
        return None
    st = group.status()
    if st.role is not Role.LEADER:
        return None
    return {"term": st.term, "commit_index": st.commit_index, "last_index": st.last_index,
            "match_index": {**st.match_index, cluster.node_id: st.last_index}}  # fmt: skip


def stream_progress(queue: Any, me: str) -> dict | None:
    """A replicated stream's progress, if `queue` is its StreamQueue led here (its `role`)."""
    role = getattr(queue, "role", None)
    if role is None or role.me != me:
        return None
    end = queue.log.next_offset
    return {"term": role.epoch, "commit_index": queue.committed_end, "last_index": end,
            "match_index": {**{r: role.ends.get(r, 0) for r in role.replicas}, me: end}}  # fmt: skip


def register(cluster: Cluster, vhosts: Mapping[str, Any]) -> None:
    """Serve the other members' CALL: `vhosts` is the node's (for its streams)."""

    async def progress_call(peer: str, args: dict) -> dict:
        groups, streams = args.get("groups", []), args.get("streams", [])
        if not isinstance(groups, list) or not all(isinstance(n, str) for n in groups):
            raise BadRequest("'groups' must be a list of group names")
        if not isinstance(streams, list) or not all(
                isinstance(s, list) and len(s) == 2 and all(isinstance(p, str) for p in s) for s in streams):  # fmt: skip
            raise BadRequest("'streams' must be a list of [vhost, name] pairs")
        if len(groups) + len(streams) > MAX_ITEMS:
            raise BadRequest(f"at most {MAX_ITEMS} groups and streams per call")
        out_groups = {n: p for n in groups if (p := group_progress(cluster, n)) is not None}
        out_streams = []
        for vhost, name in streams:
            vh = vhosts.get(vhost)
            p = stream_progress(vh.queues.get(name), cluster.node_id) if vh is not None else None
            if p is not None:
                out_streams.append({"vhost": vhost, "name": name, **p})
        return {"groups": out_groups, "streams": out_streams}

    cluster.calls[CALL] = progress_call


async def from_leaders(cluster: Cluster, wanted: dict[str, dict[str, list]]) -> tuple[dict, dict]:
    """Asks each leader (member -> {"groups": [...], "streams": [[vhost, name], ...]}) at
    once; returns ({group: progress}, {(vhost, name): progress}). A leader that fails or
    is slow adds nothing."""

    async def ask(member: str, args: dict) -> dict:
        with contextlib.suppress(Exception):  # unreachable, stopping, an older node without the call
            return await cluster.call(member, CALL, args, timeout=CALL_TIMEOUT)
        return {}

    groups: dict[str, dict] = {}
    streams: dict[tuple[str, str], dict] = {}
    for answer in await asyncio.gather(*(ask(m, args) for m, args in wanted.items())):
        groups.update(answer.get("groups", {}))
        for s in answer.get("streams", []):
            streams[(s["vhost"], s["name"])] = s
    return groups, streams
