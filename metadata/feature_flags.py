"""Feature flags: new behaviour that changes inter-node messages or stored
data hides behind a flag, enabled only once every member supports it
(REFERENCE.md, "Feature flags and rolling upgrades"; RabbitMQ's
rabbit_feature_flags).

Two halves, kept apart on purpose:
- this module is local knowledge: the flags this build knows, which of them
  it supports, and the report a node makes of itself when it joins or
  restarts (`local_member` -> an AddMember command);
- the metadata machine holds the cluster's view: each member's reported
  version and supported set, and the enabled flags. Its decisions use only
  that replicated data, never this registry, so members running different
  versions still agree on every command.

A flag is enabled by proposing EnableFeatureFlag; the machine refuses it
(precondition-failed) while any member does not support it, and refuses a
member that lacks a flag already enabled. `plan_enable` lists a flag's
dependencies first, so a caller proposes them in order.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from metadata.commands import AddMember

__all__ = [
    "CONSISTENT_HASH_EXCHANGE",
    "CREDIT_API_V2",
    "DELAYED_MESSAGE_EXCHANGE",
    "EXCHANGE_POLICIES",
    "FLAGS",
    "OPERATOR_POLICIES",
    "QUORUM_QUEUE_POLICIES",
    "QUORUM_CONSUMER_TIMEOUT",
    "QUORUM_PUBLISHER_FLOW",
    "QUORUM_QUEUE_PRIORITIES",
    "QUORUM_QUEUE_PUBLISH_BATCH",
    "QUORUM_QUEUE_V1",
    "QUORUM_TICK_CLOCK",
    "QUEUE_PROXY_RECORDS",
    "SHOVELS",
    "STREAM_COMMIT_NOTICES",
    "STREAM_QUEUE",
    "STREAM_REPLICATION",
    "TOPIC_PERMISSIONS",
    "VHOST_DEFAULT_QUEUE_TYPE",
    "VHOST_DELETION_PROTECTION",
    "QUEUE_DECLARING_USER",
    "VHOST_MAX_QUEUES",
    "WARREN_METADATA_RAFT_V1",
    "FeatureFlag",
    "FeatureFlagRegistry",
    "GLOBAL_PARAMETERS",
    "local_member",
]

STABLE = "stable"
EXPERIMENTAL = "experimental"

WARREN_METADATA_RAFT_V1 = "warren_metadata_raft_v1"
CREDIT_API_V2 = "credit_api_v2"
QUORUM_QUEUE_V1 = "quorum_queue_v1"
OPERATOR_POLICIES = "operator_policies"
TOPIC_PERMISSIONS = "topic_permissions"
QUORUM_QUEUE_POLICIES = "quorum_queue_policies"
VHOST_MAX_QUEUES = "vhost_max_queues"
QUORUM_QUEUE_PRIORITIES = "quorum_queue_priorities"
QUORUM_QUEUE_PUBLISH_BATCH = "quorum_queue_publish_batch"
EXCHANGE_POLICIES = "exchange_policies"
QUEUE_PROXY_RECORDS = "queue_proxy_records"
STREAM_QUEUE = "stream_queue"
STREAM_REPLICATION = "stream_replication"
QUORUM_PUBLISHER_FLOW = "quorum_publisher_flow"
STREAM_COMMIT_NOTICES = "stream_commit_notices"
VHOST_DEFAULT_QUEUE_TYPE = "vhost_default_queue_type"
GLOBAL_PARAMETERS = "global_parameters"
QUORUM_CONSUMER_TIMEOUT = "quorum_consumer_timeout"
CONSISTENT_HASH_EXCHANGE = "consistent_hash_exchange"
VHOST_DELETION_PROTECTION = "vhost_deletion_protection"
QUEUE_DECLARING_USER = "queue_declaring_user"
DELAYED_MESSAGE_EXCHANGE = "delayed_message_exchange"
SHOVELS = "shovels"
QUORUM_TICK_CLOCK = "quorum_tick_clock"


@dataclass(frozen=True, slots=True)
class FeatureFlag:
    name: str
    description: str
    stability: str  # "stable" or "experimental"
    introduced_in: str  # the Warren version that first knew it
    supported: bool = True  # whether this build can run with it enabled
    depends_on: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.stability not in (STABLE, EXPERIMENTAL):
            raise ValueError(f"feature flag {self.name!r}: stability is stable or experimental")


class FeatureFlagRegistry:
    """The flags one build knows, by name, in declaration order."""

    def __init__(self, flags: Iterable[FeatureFlag]):
        self._flags: dict[str, FeatureFlag] = {}
        for flag in flags:
            if flag.name in self._flags:
                raise ValueError(f"feature flag {flag.name!r} declared twice")
            for dep in flag.depends_on:
                if dep not in self._flags:
                    raise ValueError(f"feature flag {flag.name!r} depends on {dep!r}, declared later or unknown")
            self._flags[flag.name] = flag

    def __iter__(self) -> Iterator[FeatureFlag]:
        return iter(self._flags.values())

    def __contains__(self, name: object) -> bool:
        return name in self._flags

    def get(self, name: str) -> FeatureFlag | None:
        return self._flags.get(name)

    def supported(self) -> tuple[str, ...]:
        """What this node reports it supports, sorted."""
        return tuple(sorted(f.name for f in self._flags.values() if f.supported))

    def default_enabled(self) -> tuple[str, ...]:
        """What a brand-new cluster enables at once, dependencies first: every
        stable flag this build supports (as RabbitMQ does)."""
        names: list[str] = []
        for flag in self._flags.values():
            if flag.stability == STABLE and flag.supported:
                names.extend(n for n in self.plan_enable(flag.name) if n not in names)
        return tuple(names)

    def plan_enable(self, name: str) -> tuple[str, ...]:
        """`name` and its dependencies, dependencies first."""
        flag = self._flags.get(name)
        if flag is None:
            raise KeyError(f"unknown feature flag {name!r}")
        order: list[str] = []
        for dep in flag.depends_on:
            order.extend(n for n in self.plan_enable(dep) if n not in order)
        order.append(name)
        return tuple(order)


FLAGS = FeatureFlagRegistry([
    FeatureFlag(WARREN_METADATA_RAFT_V1,
                "Topology, users, permissions and policies live in the Raft metadata store",
                STABLE, "0.1.0"),
    FeatureFlag(CREDIT_API_V2,
                "Queues hold each consumer link's flow state and answer FLOWs with credit replies",
                STABLE, "0.1.0"),
    FeatureFlag(QUORUM_QUEUE_V1,
                "Quorum queues: a Raft group per queue, its state machine in the log",
                STABLE, "0.1.0", depends_on=(WARREN_METADATA_RAFT_V1,)),
    FeatureFlag(OPERATOR_POLICIES,
                "Operator policies: a second set of policies whose numeric limits cap what queues declare",
                STABLE, "0.2.0", depends_on=(WARREN_METADATA_RAFT_V1,)),
    FeatureFlag(TOPIC_PERMISSIONS,
                "Topic permissions: per-exchange patterns on the routing keys of topic exchanges",
                STABLE, "0.2.0", depends_on=(WARREN_METADATA_RAFT_V1,)),
    FeatureFlag(QUORUM_QUEUE_POLICIES,
                "Policies change a quorum queue's limits through its own log (the quorum.set_config command)",
                STABLE, "0.2.0", depends_on=(QUORUM_QUEUE_V1,)),
    FeatureFlag(VHOST_MAX_QUEUES,
                "The vhost limit max-queues, checked when a queue is declared",
                STABLE, "0.2.0", depends_on=(WARREN_METADATA_RAFT_V1,)),
    FeatureFlag(QUORUM_QUEUE_PRIORITIES,
                "Quorum queues read message priorities: above 4 is high, served 2:1 with normal (quorum.publish v2)",
                STABLE, "0.2.0", depends_on=(QUORUM_QUEUE_V1,)),
    FeatureFlag(QUORUM_QUEUE_PUBLISH_BATCH,
                "Quorum queues log publishes as quorum.publish version 3: the publisher's bytes in a binary layout,"
                " stored by every replica as they are (priorities read as in version 2)",
                STABLE, "0.2.0", depends_on=(QUORUM_QUEUE_PRIORITIES,)),
    FeatureFlag(EXCHANGE_POLICIES,
                "Policies give exchanges an alternate exchange (the policy key alternate-exchange): every node"
                " routes by it only once all know it",
                STABLE, "0.2.0", depends_on=(WARREN_METADATA_RAFT_V1,)),
    FeatureFlag(QUEUE_PROXY_RECORDS,
                "A node using a queue on another node sends a loop turn's messages as one binary queue.proxy"
                " record (node/vhosts/proxy_records.py) instead of one AMQP list each",
                STABLE, "0.2.0"),
    FeatureFlag(STREAM_QUEUE,
                "Streams: append-only logs of segment files, read by offset (x-queue-type stream)",
                STABLE, "0.2.0", depends_on=(WARREN_METADATA_RAFT_V1,)),
    FeatureFlag(STREAM_REPLICATION,
                "Streams are replicated: a leader and replicas on x-initial-cluster-size nodes, fenced by epochs"
                " in the metadata (metadata.stream_elect); replicas pull chunks over stream.repl messages",
                STABLE, "0.3.0", depends_on=(STREAM_QUEUE,)),
    FeatureFlag(QUORUM_PUBLISHER_FLOW,
                "A quorum queue holds its publishers while a replica with consumers lags the leader"
                " (quorum_consumer_lag_max); followers report what they applied on quorum.flow messages",
                STABLE, "0.3.0", depends_on=(QUORUM_QUEUE_V1,)),
    FeatureFlag(STREAM_COMMIT_NOTICES,
                "A stream leader tells a replica waiting for chunks that the committed end moved in a"
                " stream.repl `committed` notice and keeps its fetch (no answer and new fetch per move)",
                STABLE, "0.3.0", depends_on=(STREAM_REPLICATION,)),
    FeatureFlag(VHOST_DEFAULT_QUEUE_TYPE,
                "A vhost's default queue type (metadata.add_vhost version 2), given to queues declared there"
                " without x-queue-type",
                STABLE, "0.3.0", depends_on=(WARREN_METADATA_RAFT_V1,)),
    FeatureFlag(GLOBAL_PARAMETERS,
                "Global runtime parameters (cluster_name, internal_cluster_id) kept in the metadata",
                STABLE, "0.3.0", depends_on=(WARREN_METADATA_RAFT_V1,)),
    FeatureFlag(QUORUM_CONSUMER_TIMEOUT,
                "Quorum queues time out consumers holding a message unsettled too long: the leader's ticks are"
                " quorum.tick version 2, carrying the timeout (x-consumer-timeout, consumer-timeout, consumer_timeout)",
                STABLE, "0.3.0", depends_on=(QUORUM_QUEUE_V1,)),
    FeatureFlag(CONSISTENT_HASH_EXCHANGE,
                "The x-consistent-hash exchange type (members without it could not route through one)",
                STABLE, "0.3.0", depends_on=(WARREN_METADATA_RAFT_V1,)),
    FeatureFlag(VHOST_DELETION_PROTECTION,
                "A vhost protected from deletion (metadata.set_vhost_deletion_protection), whose deletion every"
                " member then refuses",
                STABLE, "0.3.0", depends_on=(WARREN_METADATA_RAFT_V1,)),
    FeatureFlag(QUEUE_DECLARING_USER,
                "A queue's record keeps the user who declared it (metadata.declare_queue version 2), which"
                " GET /api/users/{user}/queues lists",
                STABLE, "0.3.0", depends_on=(WARREN_METADATA_RAFT_V1,)),
    FeatureFlag(DELAYED_MESSAGE_EXCHANGE,
                "The x-delayed-message exchange type (members without it would route delayed messages at once);"
                " its messages wait in a quorum queue with a consumer timeout",
                STABLE, "0.3.0", depends_on=(QUORUM_QUEUE_V1, QUORUM_CONSUMER_TIMEOUT)),
    FeatureFlag(SHOVELS,
                "Dynamic shovels: `shovel` runtime parameters (metadata.set_parameter) kept in the metadata, each"
                " run by one member chosen from it",
                STABLE, "0.3.0", depends_on=(WARREN_METADATA_RAFT_V1,)),
    FeatureFlag(QUORUM_TICK_CLOCK,
                "A quorum queue's clock (expiry, consumer timeout) is its leader's time of the last tick"
                " (quorum.tick version 3), no longer the largest time any publishing node stamped",
                STABLE, "0.3.0", depends_on=(QUORUM_CONSUMER_TIMEOUT,)),
])  # fmt: skip


def local_member(node: str, version: str, registry: FeatureFlagRegistry = FLAGS,
                 idempotency_key: str | None = None) -> AddMember:  # fmt: skip
    """The AddMember command this node proposes when it joins or restarts:
    its version (the caller's build) and the flags it supports."""
    key = idempotency_key if idempotency_key is not None else f"add-member/{node}/{uuid.uuid4()}"
    return AddMember(key, node, version, registry.supported())
