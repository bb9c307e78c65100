"""Forgetting a member takes its replicas out of every quorum queue and replicated stream,
as RabbitMQ's forget_cluster_node does (its quorum queues' shrink_all, and the streams'
replicas). Left there, a forgotten node's replicas stay voters of their groups: the groups
need a majority that counts a node that will never answer, and the node, wiped and started
again at the same address (how a replaced machine comes back), would vote with an empty log.

Each queue is shrunk through its group's leader (quorum_groups.QuorumGroups.change_member);
a group whose leader was the forgotten node elects another one first, so a refusal is tried
again for a while. What cannot be shrunk (a queue whose only replica it was, a group without
a majority) is reported, not hidden.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from node.cluster.cluster import ClusterError
from routing.errors import NotFound

from .metadata_store import MetadataUnavailable

log = logging.getLogger("warren.quorum")

RETRY_FOR = 20.0  # seconds one queue is tried for while its group elects a leader
RETRY_EVERY = 0.5


async def shrink_all(quorum: Any, state: Any, member: str, retry_for: float = RETRY_FOR) -> list[dict]:
    """Remove `member` from every quorum queue and stream that lists it among its replicas;
    one entry per queue: vhost, name, type, and the members left or the error."""
    done = []
    for vhost, vh in sorted(state.vhosts.items()):
        for name, record in sorted(vh.queues.items()):
            if record.type not in ("quorum", "stream") or member not in record.replicas:
                continue
            entry: dict[str, Any] = {"vhost": vhost, "name": name, "type": record.type}
            try:
                entry["members"] = await _remove(quorum, vhost, name, member, retry_for)
                log.info("%s '%s' in vhost '%s': replica on %s removed", record.type, name, vhost, member)
            except NotFound:
                continue  # deleted meanwhile
            except (ClusterError, MetadataUnavailable) as e:
                entry["error"] = str(e)
                log.warning("%s '%s' in vhost '%s': replica on %s not removed: %s", record.type, name, vhost,
                            member, e)  # fmt: skip
            done.append(entry)
    return done


async def _remove(quorum: Any, vhost: str, name: str, member: str, retry_for: float) -> list[str]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + retry_for
    while True:
        try:
            return await quorum.change_member(vhost, name, member, False)
        except (ClusterError, MetadataUnavailable) as e:
            if "would have no replica left" in str(e) or loop.time() >= deadline:
                raise
        await asyncio.sleep(RETRY_EVERY)
