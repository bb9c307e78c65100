"""Quorum queue membership reconciliation: a queue whose target group size
(`x-quorum-target-group-size`, or the `target-group-size` policy key; the larger
wins) exceeds its replicas grows onto reachable members that lack it, as
RabbitMQ's continuous membership reconciliation does: after a node joins, or
after a replica was lost and removed, the queue gets its replicas back.

Each queue is grown by the node leading it (one decision per queue, no race
between members), onto the members holding the fewest replicas first, never
past the cluster's size. It runs every `interval` seconds; a pass costs a walk
of the metadata's quorum queues. Growing only, as RabbitMQ does by default
(its auto-remove is off): a replica is removed only by an operator.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from metadata.state import MetadataState
from node.tasks import BackgroundTasks
from node.vhosts.quorum_groups import group_name

log = logging.getLogger("warren.quorum.reconcile")

ARGUMENT = "x-quorum-target-group-size"
POLICY_ARGUMENT = "x-target-group-size"  # the policy key target-group-size, merged as x-<key>


@dataclass(frozen=True)
class Growth:
    vhost: str
    name: str
    add: tuple[str, ...]  # the members to add, in order


def target_of(arguments: Mapping[str, Any]) -> int | None:
    """The queue's target group size from its effective arguments (argument and policy)."""
    found = [v for v in (arguments.get(ARGUMENT), arguments.get(POLICY_ARGUMENT))
             if isinstance(v, int) and not isinstance(v, bool) and v > 0]  # fmt: skip
    return max(found) if found else None


def plan(state: MetadataState, leads: Callable[[str], bool], arguments_of: Callable[[str, str], Mapping | None],
         reachable: Callable[[str], bool]) -> list[Growth]:  # fmt: skip
    """What one pass adds: for each quorum queue this node leads below its target, the
    reachable members without a replica, those holding the fewest replicas first."""
    held = Counter(m for vh in state.vhosts.values() for q in vh.queues.values() if q.type == "quorum"
                   for m in q.replicas)  # fmt: skip
    candidates = [m for m in state.members if reachable(m)]
    out = []
    for vh in state.vhosts.values():
        for q in vh.queues.values():
            if q.type != "quorum" or not leads(group_name(vh.name, q.name)):
                continue
            arguments = arguments_of(vh.name, q.name)
            target = target_of(arguments if arguments is not None else q.arguments_map)
            if target is None or len(q.replicas) >= target:
                continue
            spare = sorted((m for m in candidates if m not in q.replicas), key=lambda m: (held[m], m))
            add = tuple(spare[: target - len(q.replicas)])
            if add:
                out.append(Growth(vh.name, q.name, add))
                held.update(add)
    return out


class QuorumReconciler:
    def __init__(self, *, loop: asyncio.AbstractEventLoop, interval: float, state: Callable[[], MetadataState],
                 leads: Callable[[str], bool], arguments_of: Callable[[str, str], Mapping | None],
                 reachable: Callable[[str], bool],
                 add_member: Callable[[str, str, str], Awaitable[Any]]) -> None:  # fmt: skip
        self._interval = interval
        self._state, self._leads, self._arguments_of, self._reachable = state, leads, arguments_of, reachable
        self._add_member = add_member
        self._tasks = BackgroundTasks(loop, log)
        self.passes = 0  # completed passes (tests and health checks read it)

    def start(self) -> None:
        if self._interval > 0:
            self._tasks.spawn(self._run(), "quorum membership reconciliation")

    def stop(self) -> None:
        self._tasks.cancel()

    async def reconcile(self) -> list[dict]:
        """One pass; a member that cannot be added is logged and tried again next pass."""
        done = []
        for growth in plan(self._state(), self._leads, self._arguments_of, self._reachable):
            for node in growth.add:
                try:
                    await self._add_member(growth.vhost, growth.name, node)
                    done.append({"vhost": growth.vhost, "name": growth.name, "added": node})
                except Exception as e:  # the queue was deleted, the node left...: next pass sees
                    log.warning("could not add %s to quorum queue '%s' in vhost '%s': %s", node, growth.name,
                                growth.vhost, e)  # fmt: skip
                    break
        self.passes += 1
        return done

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                added = await self.reconcile()
            except Exception:
                log.exception("a quorum membership reconciliation pass failed")
                continue
            for a in added:
                log.info("quorum queue '%s' in vhost '%s' grew onto %s (its target group size)", a["name"],
                         a["vhost"], a["added"])  # fmt: skip
