"""How far each member of a Raft group has matched its leader's log, asked of the leader.

Only a group's leader knows its followers' match indexes (raft/status.py). The Raft
groups route (node/http/raft_routes.py) shows them for every group on a page, from
any node: for the groups another member leads, it asks that member with one
"raft.progress" call (node messages, node/cluster/rpc.py) naming the groups, and the
member answers for those it leads now. A member that does not answer in
CALL_TIMEOUT leaves its groups' lag unknown; the page is not held up longer.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from raft.status import Role

if TYPE_CHECKING:
    from node.cluster.cluster import Cluster

CALL = "raft.progress"
MAX_GROUPS = 500  # per call: the route's largest page
CALL_TIMEOUT = 1.0  # seconds a leader may take to answer


class BadRequest(ValueError):
    status = 400


def progress(cluster: Cluster, names: list[str]) -> dict[str, dict]:
    """{group: {term, commit_index, last_index, match_index: {member: index}}} for the
    groups among `names` this node leads (its own entry is its last index)."""
    out = {}
    for name in names:
        group = cluster.groups.get(name)
        if group is None:
            continue
        st = group.status()
        if st.role is not Role.LEADER:
            continue
        out[name] = {"term": st.term, "commit_index": st.commit_index, "last_index": st.last_index,
                     "match_index": {**st.match_index, cluster.node_id: st.last_index}}  # fmt: skip
    return out


def register(cluster: Cluster) -> None:
    async def progress_call(peer: str, args: dict) -> dict:
        names = args.get("groups")
        if not isinstance(names, list) or len(names) > MAX_GROUPS or not all(isinstance(n, str) for n in names):
            raise BadRequest(f"'groups' must be a list of at most {MAX_GROUPS} group names")
        return {"groups": progress(cluster, names)}

    cluster.calls[CALL] = progress_call


async def from_leaders(cluster: Cluster, wanted: dict[str, list[str]]) -> dict[str, dict]:
    """`progress` of each leader (member -> its groups), asked at once; a leader that
    fails or is slow adds nothing."""

    async def ask(member: str, names: list[str]) -> dict:
        with contextlib.suppress(Exception):  # unreachable, stopping, an older node without the call
            reply = await cluster.call(member, CALL, {"groups": names}, timeout=CALL_TIMEOUT)
            return reply.get("groups", {})
        return {}

    out: dict[str, dict] = {}
    for answer in await asyncio.gather(*(ask(m, names) for m, names in wanted.items())):
        out.update(answer)
    return out
