"""Applies policies and operator policies to this node's queues, and
policies' exchange key (`alternate-exchange`) to the vhosts' routing tables.

Subscribed to the metadata machine after node/vhosts/local_queues.py, so a
queue exists by the time its declaration reaches here. Whenever a policy is
set or cleared, every queue of its vhost is looked at again; a new queue is
looked at once it starts; a restored snapshot looks at all of them.

Each queue object gets `policy_state` (routing/policies.py's Effective:
the policy names and the effective definition, shown in queue info over
HTTP and /management). A queue this node runs also acts on the merged
arguments: a classic queue at once (ClassicQueue.apply_policy), a quorum
queue through a SetConfig in its own Raft log (QuorumQueue.apply_policy),
once the quorum_queue_policies feature flag is enabled (members that do not
know the command must never see it). Proxies of queues other nodes run
only show the policy.

Exchanges: the routing table (metadata/projections.py, subscribed first)
holds each exchange's alternate exchange; a policy's is set on it whenever
a policy changes, an exchange is declared or a snapshot is restored, once
the exchange_policies feature flag is enabled. Every node does so from the
same metadata, so every node routes alike.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from metadata import effects as fx
from metadata.effects import Effect, Result
from metadata.feature_flags import EXCHANGE_POLICIES, QUORUM_QUEUE_POLICIES
from metadata.state import MetadataState
from node.vhosts.delayed_messages import INTERNAL_PREFIXES
from queues.base import QueueArgumentError
from routing import policies

if TYPE_CHECKING:
    from metadata.machine import MetadataMachine
    from metadata.projections import Projections
    from node.vhosts.vhost import VHost

log = logging.getLogger("warren.policies")


class PolicyApplier:
    def __init__(self, machine: MetadataMachine, projections: Projections, vhosts: dict[str, VHost]) -> None:
        self.machine = machine
        self.projections = projections
        self.vhosts = vhosts  # the node's, as node/vhosts/local_queues.py keeps them

    def on_applied(self, command: Any, result: Result, effects: tuple[Effect, ...], index: int) -> None:
        for e in effects:
            if isinstance(e, fx.PolicySet | fx.PolicyCleared):
                self.apply_vhost(e.vhost)
            elif isinstance(e, fx.ExchangeDeclared):
                self.apply_exchange(e.vhost, e.name)
            elif isinstance(e, fx.FeatureFlagEnabled) and e.name in (QUORUM_QUEUE_POLICIES, EXCHANGE_POLICIES):
                self.on_restored(self.machine.state)
            elif isinstance(e, fx.QueueDeclared | fx.QueueReplicasChanged):
                vhost = self.vhosts.get(e.vhost)
                queue = vhost.queues.get(e.name) if vhost is not None else None
                if queue is not None:
                    self.apply(queue)

    def on_restored(self, state: MetadataState) -> None:
        for name in sorted(set(self.vhosts) | set(self.projections.tables)):
            self.apply_vhost(name)

    def apply_vhost(self, name: str) -> None:
        table = self.projections.table(name)
        if table is not None:
            for exchange in table.exchanges():
                self.apply_exchange(name, exchange.name)
        vhost = self.vhosts.get(name)
        if vhost is not None:
            for queue in list(vhost.queues.values()):
                self.apply(queue)

    def apply_exchange(self, vhost: str, name: str) -> None:
        """The alternate exchange the policy that applies to exchange `name`
        sets (operator policies have no exchange keys)."""
        projections = self.projections
        table = projections.table(vhost)
        if table is None or EXCHANGE_POLICIES not in projections.feature_flags:
            return  # until every member routes by a policy's alternate, none does
        policy = policies.choose(projections.vhost_policies(vhost), "exchange", name)
        table.set_policy_alternate(name, policies.alternate_exchange(policy))

    def effective(self, queue: Any) -> policies.Effective:
        projections = self.projections
        qtype = queue.type_name
        if queue.name.startswith(INTERNAL_PREFIXES):
            # a delayed exchange's own queue: a policy's TTL, length limit or consumer timeout
            # would drop or churn the delayed messages (node/vhosts/delayed_messages.py)
            return policies.effective(queue.arguments)
        policy = policies.choose(projections.vhost_policies(queue.vhost), "queue", queue.name, qtype)
        operator = policies.choose(projections.vhost_policies(queue.vhost, operator=True), "queue", queue.name, qtype)
        return policies.effective(queue.arguments, policy, operator)

    def apply(self, queue: Any) -> None:
        state = self.effective(queue)
        queue.policy_state = state
        if queue.deleted:
            return
        if queue.type_name == "quorum" and QUORUM_QUEUE_POLICIES not in self.projections.feature_flags:
            return
        try:
            queue.apply_policy(state.arguments)
        except QueueArgumentError as e:  # e.g. a policy's key the queue's own arguments contradict
            log.warning("policy %s not applied to queue '%s' in vhost '%s': %s", state.policy, queue.name,
                        queue.vhost, e)  # fmt: skip
