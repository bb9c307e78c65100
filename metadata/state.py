"""The metadata state: immutable records in persistent maps.

`MetadataState` never changes; `apply` (metadata/machine.py) derives the next
one, sharing every part it did not touch (metadata/pmap.py), so a caller may
keep an old state (a test, a snapshot being written) while the machine moves
on.

Every stored record carries `format`, the version of its layout. The
snapshot (metadata/snapshot.py) writes it with the record, and a later
release that changes a layout registers a migration from the old format, as
RabbitMQ's Khepri records carry a version for their upgrades. Records hold
arguments as the AMQP encoding of the map (metadata/commands.py `pack`), so
they are written back exactly as declared.

Invariants (kept by machine.py and topology.py):
- every vhost has the built-in exchanges ("" and amq.*), created with it;
- a binding's source exchange and destination exist in its vhost;
- `VHostState.incoming` indexes exactly the bindings in `bindings`;
- a permission names an existing user and an existing vhost;
- a limit names an existing vhost ("vhost" scope) or user ("user" scope);
- `feature_flags` is sorted, and every member supports each of them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from metadata.commands import EMPTY_MAP, unpack
from metadata.effects import Result
from metadata.pmap import EMPTY, PMap
from routing.model import ExchangeType
from routing.table import BUILTIN_EXCHANGES

__all__ = [
    "BindingRecord",
    "ExchangeRecord",
    "GlobalParameterRecord",
    "ParameterRecord",
    "LimitRecord",
    "MemberRecord",
    "MetadataState",
    "PermissionRecord",
    "PolicyRecord",
    "TopicPermissionRecord",
    "QueueRecord",
    "Recent",
    "StreamRecord",
    "UserRecord",
    "VHostRecord",
    "VHostState",
]

MACHINE_VERSION = 1
DEFAULT_RECENT_LIMIT = 4096


def _empty() -> Any:
    return field(default_factory=lambda: EMPTY)


class _Arguments:
    __slots__ = ()

    @property
    def arguments_map(self) -> dict[str, Any]:
        return unpack(self.arguments)  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class VHostRecord:
    name: str
    description: str = ""
    tags: tuple[str, ...] = ()
    default_queue_type: str = ""  # format 2; "" for none (classic)
    protected_from_deletion: bool = False  # format 3: DeleteVHost is refused (RabbitMQ 4.1's protection)
    format: int = 3


@dataclass(frozen=True, slots=True)
class UserRecord:
    name: str
    password_hash: str
    tags: tuple[str, ...] = ()
    format: int = 1


@dataclass(frozen=True, slots=True)
class PermissionRecord:
    user: str
    vhost: str
    configure: str
    write: str
    read: str
    format: int = 1


@dataclass(frozen=True, slots=True)
class ExchangeRecord(_Arguments):
    vhost: str
    name: str
    type: str
    durable: bool = True
    auto_delete: bool = False
    internal: bool = False
    arguments: bytes = EMPTY_MAP
    format: int = 1


@dataclass(frozen=True, slots=True)
class QueueRecord(_Arguments):
    vhost: str
    name: str
    type: str
    durable: bool
    auto_delete: bool
    exclusive_owner: str | None
    arguments: bytes
    leader: str
    replicas: tuple[str, ...] = ()
    user: str = ""  # format 2: who declared it ("" unknown: declared before the queue_declaring_user flag)
    format: int = 2


@dataclass(frozen=True, slots=True)
class StreamRecord:
    """A replicated stream's membership and fencing (feature flag
    stream_replication): the leader, the replicas (the leader among them) and
    the epoch, raised by every change of leader or replicas. A node acts on
    a stream only in the epoch it learned here, so two leaders never accept
    the same epoch's writes. The queue's own record mirrors leader and
    replicas (what proxies and the HTTP API read)."""

    vhost: str
    name: str
    leader: str
    replicas: tuple[str, ...]
    epoch: int
    format: int = 1


@dataclass(frozen=True, slots=True)
class BindingRecord(_Arguments):
    vhost: str
    source: str
    destination_kind: str
    destination: str
    binding_key: str = ""
    arguments: bytes = EMPTY_MAP
    format: int = 1


@dataclass(frozen=True, slots=True)
class PolicyRecord:
    vhost: str
    name: str
    pattern: str
    apply_to: str
    definition: bytes
    priority: int
    format: int = 1

    @property
    def definition_map(self) -> dict[str, Any]:
        return unpack(self.definition)


@dataclass(frozen=True, slots=True)
class LimitRecord:
    scope: str  # "vhost" or "user"
    name: str  # of the vhost or user
    limit: str  # "max-connections"
    value: int  # negative: no limit
    format: int = 1


@dataclass(frozen=True, slots=True)
class TopicPermissionRecord:
    """A user's topic permissions on one exchange of a vhost: patterns the
    routing keys of topic exchanges must match (write: publishing, read:
    binding), as RabbitMQ's topic authorisation."""

    user: str
    vhost: str
    exchange: str
    write: str
    read: str
    format: int = 1


@dataclass(frozen=True, slots=True)
class GlobalParameterRecord:
    name: str
    value: str
    format: int = 1


@dataclass(frozen=True, slots=True)
class ParameterRecord:
    vhost: str
    component: str
    name: str
    value: str  # JSON text
    format: int = 1


@dataclass(frozen=True, slots=True)
class MemberRecord:
    node: str
    version: str
    supported_flags: tuple[str, ...] = ()  # sorted
    format: int = 1


@dataclass(frozen=True, slots=True)
class Recent:
    """The outcome of a command applied under an idempotency key."""

    digest: bytes  # of the command's encoding: a key reused for another command is refused
    result: Result


# A binding's place in VHostState.bindings[source]: all bindings with the same
# source, destination and key, which differ by their arguments.
BindingSlot = tuple[str, str, str]  # (destination_kind, destination, binding_key)


@dataclass(frozen=True, slots=True)
class VHostState:
    record: VHostRecord
    exchanges: PMap[str, ExchangeRecord] = _empty()
    queues: PMap[str, QueueRecord] = _empty()
    # source exchange -> (kind, destination, key) -> bindings (by arguments),
    # in creation order; a source with no binding has no entry.
    bindings: PMap[str, PMap[BindingSlot, tuple[BindingRecord, ...]]] = _empty()
    # (kind, destination) -> {(source, key): None}: who binds to a destination.
    incoming: PMap[tuple[str, str], PMap[tuple[str, str], None]] = _empty()
    policies: PMap[str, PolicyRecord] = _empty()
    operator_policies: PMap[str, PolicyRecord] = _empty()  # a namespace of their own, as in RabbitMQ
    streams: PMap[str, StreamRecord] = _empty()  # replicated streams, by queue name

    @property
    def name(self) -> str:
        return self.record.name

    @classmethod
    def new(cls, record: VHostRecord) -> VHostState:
        exchanges = PMap(
            (name, ExchangeRecord(record.name, name, ExchangeType(t).value)) for name, t in BUILTIN_EXCHANGES
        )
        return cls(record, exchanges=exchanges)

    def replace(self, **changes: Any) -> VHostState:
        return dataclasses.replace(self, **changes)

    def all_bindings(self) -> list[BindingRecord]:
        """Every binding, by source then creation order."""
        return [b for slots in self.bindings.values() for variants in slots.values() for b in variants]

    def bindings_to(self, kind: str, destination: str) -> list[BindingRecord]:
        """The bindings leading to a destination, in a canonical order."""
        out: list[BindingRecord] = []
        for source, key in sorted(self.incoming.get((kind, destination), EMPTY)):
            out.extend(self.bindings[source][(kind, destination, key)])
        return out


@dataclass(frozen=True, slots=True)
class MetadataState:
    vhosts: PMap[str, VHostState] = _empty()
    users: PMap[str, UserRecord] = _empty()
    permissions: PMap[tuple[str, str], PermissionRecord] = _empty()  # (user, vhost) ->
    topic_permissions: PMap[tuple[str, str, str], TopicPermissionRecord] = _empty()  # (user, vhost, exchange) ->
    members: PMap[str, MemberRecord] = _empty()
    feature_flags: tuple[str, ...] = ()  # enabled, sorted
    limits: PMap[tuple[str, str, str], LimitRecord] = _empty()  # (scope, name, limit) ->
    global_parameters: PMap[str, GlobalParameterRecord] = _empty()
    parameters: PMap[tuple[str, str, str], ParameterRecord] = _empty()  # (vhost, component, name) ->
    # Idempotency keys of recent commands, in two generations: when `recent`
    # holds `recent_limit` keys it becomes `recent_previous` and a new one
    # starts, so between limit and 2 x limit keys are remembered. Bounded by
    # count, never by time, so every member forgets the same keys.
    recent: PMap[str, Recent] = _empty()
    recent_previous: PMap[str, Recent] = _empty()
    recent_limit: int = DEFAULT_RECENT_LIMIT
    machine_version: int = MACHINE_VERSION

    def replace(self, **changes: Any) -> MetadataState:
        return dataclasses.replace(self, **changes)

    # -- reading ----------------------------------------------------------------

    def vhost(self, name: str) -> VHostState | None:
        return self.vhosts.get(name)

    def queue(self, vhost: str, name: str) -> QueueRecord | None:
        vh = self.vhosts.get(vhost)
        return None if vh is None else vh.queues.get(name)

    def stream(self, vhost: str, name: str) -> StreamRecord | None:
        vh = self.vhosts.get(vhost)
        return None if vh is None else vh.streams.get(name)

    def exchange(self, vhost: str, name: str) -> ExchangeRecord | None:
        vh = self.vhosts.get(vhost)
        return None if vh is None else vh.exchanges.get(name)

    def bindings(self, vhost: str) -> list[BindingRecord]:
        vh = self.vhosts.get(vhost)
        return [] if vh is None else vh.all_bindings()

    def permission(self, user: str, vhost: str) -> PermissionRecord | None:
        return self.permissions.get((user, vhost))

    def flag_enabled(self, name: str) -> bool:
        return name in self.feature_flags

    def recent_result(self, key: str) -> Recent | None:
        seen = self.recent.get(key)
        return seen if seen is not None else self.recent_previous.get(key)

    # -- deriving ---------------------------------------------------------------

    def with_vhost(self, vh: VHostState) -> MetadataState:
        return self.replace(vhosts=self.vhosts.set(vh.name, vh))

    def remember(self, key: str, digest: bytes, result: Result) -> MetadataState:
        recent = self.recent
        previous = self.recent_previous
        if len(recent) >= self.recent_limit:
            previous, recent = recent, EMPTY
        return self.replace(recent=recent.set(key, Recent(digest, result)), recent_previous=previous)
