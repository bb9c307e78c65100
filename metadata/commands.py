"""The metadata store's commands: frozen, versioned records (raft/records.py).

Every command carries an `idempotency_key`. A proposer that retries a command
after a leader change or an unknown outcome reuses the key, and the machine
applies it at most once: the retry is answered with the first result
(metadata/machine.py). An empty key opts out (`Fence`s, which must be
applied every time).

AMQP-typed values. raft/records.py hands plain Python values back (a UInt
comes back an int, a Symbol a str), but queue and exchange arguments must
survive exactly as the client sent them (RabbitMQ compares and reports them
typed). So `arguments` (and a policy's `definition`) are held as the AMQP
encoding of the map (amqp/codec.py): pass a dict to the constructor,
it is packed; read it back with `.arguments_map` (or `unpack`). Packing is
deterministic: the same dict always gives the same bytes.

The layout of a (kind, version) never changes; a new layout is a new version
registered beside the old one (raft/records.py), and machine.py accepts both.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from amqp import codec
from raft.records import command

__all__ = [
    "COMMANDS",
    "AddMember",
    "AddVHost",
    "AddVHostWithQueueType",
    "Bind",
    "Bootstrap",
    "ClearLimit",
    "ClearOperatorPolicy",
    "ClearParameter",
    "ClearPermissions",
    "ClearPolicy",
    "ClearTopicPermissions",
    "DeclareExchange",
    "DeclareQueue",
    "DeclareQueueByUser",
    "DeleteExchange",
    "DeleteQueue",
    "DeleteUser",
    "DeleteVHost",
    "EnableFeatureFlag",
    "MetadataCommand",
    "Fence",
    "GLOBAL_PARAMETER_NAMES",
    "PARAMETER_COMPONENTS",
    "PutUser",
    "RemoveMember",
    "SetQueueReplicas",
    "SetGlobalParameter",
    "SetLimit",
    "SetOperatorPolicy",
    "SetParameter",
    "SetPermissions",
    "SetPolicy",
    "SetTopicPermissions",
    "SetVHostDeletionProtection",
    "StreamElect",
    "Unbind",
    "check_fields",
    "pack",
    "unpack",
]

EMPTY_MAP = codec.dumps({})


def pack(value: Mapping[str, Any] | bytes | None) -> bytes:
    """The AMQP encoding of a map of arguments (bytes pass through)."""
    if value is None:
        return EMPTY_MAP
    if isinstance(value, bytes):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"arguments are a mapping, not {type(value).__name__}")
    return codec.dumps(dict(value))


def unpack(data: bytes) -> dict[str, Any]:
    """The map `pack` encoded. Raises ValueError unless `data` is an AMQP map
    whose keys are all strings (or symbols)."""
    try:
        value = codec.loads(data)
    except Exception as e:  # codec.DecodeError and friends
        raise ValueError(f"arguments are not an AMQP value: {e}") from None
    if not isinstance(value, dict):
        raise ValueError(f"arguments are an AMQP map, not {type(value).__name__}")
    for key in value:
        if not isinstance(key, str):
            raise ValueError(f"argument keys are strings, not {key!r}")
    return value


class MetadataCommand:
    """Base of every metadata command: packs map fields, tuples sequences."""

    __slots__ = ()
    _PACKED: ClassVar[tuple[str, ...]] = ()
    idempotency_key: str

    def __post_init__(self) -> None:
        # Lenient on purpose: records.decode builds commands from whatever a
        # log entry holds, and raising here would fail the apply. A value of
        # the wrong type is left for check_fields to report.
        for name in self._PACKED:
            value = getattr(self, name)
            if value is None or isinstance(value, Mapping):
                object.__setattr__(self, name, pack(value))
        for name, hint in _hints(type(self)).items():
            value = getattr(self, name)
            if typing.get_origin(hint) is tuple and isinstance(value, list):
                object.__setattr__(self, name, tuple(value))

    @property
    def arguments_map(self) -> dict[str, Any]:
        return unpack(self.arguments)  # type: ignore[attr-defined]


# -- vhosts, users, permissions ------------------------------------------------


@command("metadata.add_vhost", version=1)
@dataclass(frozen=True, slots=True)
class AddVHost(MetadataCommand):
    idempotency_key: str
    name: str
    description: str = ""
    tags: tuple[str, ...] = ()


@command("metadata.add_vhost", version=2)
@dataclass(frozen=True, slots=True)
class AddVHostWithQueueType(AddVHost):
    """AddVHost with the vhost's default queue type ("" for none: classic),
    which queues declared there without x-queue-type get. Refused until the
    vhost_default_queue_type feature flag is enabled; a version 1 AddVHost,
    which does not know the field, leaves it as it is."""

    default_queue_type: str = ""


@command("metadata.set_vhost_deletion_protection", version=1)
@dataclass(frozen=True, slots=True)
class SetVHostDeletionProtection(MetadataCommand):
    """Protects a vhost from deletion, or lifts it (RabbitMQ 4.1's
    protected_from_deletion metadata): while protected, DeleteVHost is
    refused. Refused until the vhost_deletion_protection feature flag is
    enabled, since a member without it would delete the vhost anyway."""

    idempotency_key: str
    name: str
    protected: bool


@command("metadata.delete_vhost", version=1)
@dataclass(frozen=True, slots=True)
class DeleteVHost(MetadataCommand):
    idempotency_key: str
    name: str


@command("metadata.put_user", version=1)
@dataclass(frozen=True, slots=True)
class PutUser(MetadataCommand):
    """Create or replace a user. `password_hash` is routing/users.py's format
    ("" refuses every password); hashing happens before proposing, so the
    machine never sees a password nor draws a salt."""

    idempotency_key: str
    name: str
    password_hash: str
    tags: tuple[str, ...] = ()


@command("metadata.delete_user", version=1)
@dataclass(frozen=True, slots=True)
class DeleteUser(MetadataCommand):
    idempotency_key: str
    name: str


@command("metadata.set_permissions", version=1)
@dataclass(frozen=True, slots=True)
class SetPermissions(MetadataCommand):
    idempotency_key: str
    user: str
    vhost: str
    configure: str = ".*"
    write: str = ".*"
    read: str = ".*"


@command("metadata.clear_permissions", version=1)
@dataclass(frozen=True, slots=True)
class ClearPermissions(MetadataCommand):
    idempotency_key: str
    user: str
    vhost: str


# -- topology ------------------------------------------------------------------


@command("metadata.declare_exchange", version=1)
@dataclass(frozen=True, slots=True)
class DeclareExchange(MetadataCommand):
    _PACKED: ClassVar[tuple[str, ...]] = ("arguments",)
    idempotency_key: str
    vhost: str
    name: str
    type: str = "direct"
    durable: bool = True
    auto_delete: bool = False
    internal: bool = False
    arguments: bytes = EMPTY_MAP


@command("metadata.delete_exchange", version=1)
@dataclass(frozen=True, slots=True)
class DeleteExchange(MetadataCommand):
    idempotency_key: str
    vhost: str
    name: str
    if_unused: bool = False


@command("metadata.declare_queue", version=1)
@dataclass(frozen=True, slots=True)
class DeclareQueue(MetadataCommand):
    """Declare a queue placed by the proposer: the machine draws no random
    names or nodes, so a server-named queue gets its name (amq.gen-...) and
    its leader and replicas before it is proposed. `exclusive_owner` is an
    opaque id of the owning connection (e.g. "node@host/conn-42"), or None;
    `replicas` are the members holding a copy, the leader included for
    replicated types, () for a classic queue."""

    _PACKED: ClassVar[tuple[str, ...]] = ("arguments",)
    idempotency_key: str
    vhost: str
    name: str
    type: str = "classic"
    durable: bool = True
    auto_delete: bool = False
    exclusive_owner: str | None = None
    arguments: bytes = EMPTY_MAP
    leader: str = ""
    replicas: tuple[str, ...] = ()


@command("metadata.declare_queue", version=2)
@dataclass(frozen=True, slots=True)
class DeclareQueueByUser(DeclareQueue):
    """DeclareQueue with the user who declared the queue, kept in its record
    (RabbitMQ's queue option `user`: GET /api/users/{user}/queues lists by
    it); a redeclaration keeps the first user. Refused until the
    queue_declaring_user feature flag is enabled."""

    user: str = ""


@command("metadata.delete_queue", version=1)
@dataclass(frozen=True, slots=True)
class DeleteQueue(MetadataCommand):
    """Delete a queue and its bindings. if-unused/if-empty are checked by the
    queue's leader before proposing: consumers and messages are not metadata."""

    idempotency_key: str
    vhost: str
    name: str


@command("metadata.set_queue_replicas", version=1)
@dataclass(frozen=True, slots=True)
class SetQueueReplicas(MetadataCommand):
    """A replicated queue's members after one was added or removed; the
    queue's own Raft group changed its membership first (node/vhosts/quorum_groups.py)."""

    idempotency_key: str
    vhost: str
    name: str
    replicas: tuple[str, ...]


@command("metadata.stream_elect", version=1)
@dataclass(frozen=True, slots=True)
class StreamElect(MetadataCommand):
    """A replicated stream's next epoch: applied only while the stream is at
    `epoch` (a stale proposer is refused), it makes `leader` the leader of
    `replicas` (the current ones when empty) at epoch + 1. Proposed on a
    failover by the live replica with the longest log of the newest epoch
    (node/vhosts/stream_failover.py) and on a membership change."""

    idempotency_key: str
    vhost: str
    name: str
    epoch: int
    leader: str
    replicas: tuple[str, ...] = ()


@command("metadata.bind", version=1)
@dataclass(frozen=True, slots=True)
class Bind(MetadataCommand):
    _PACKED: ClassVar[tuple[str, ...]] = ("arguments",)
    idempotency_key: str
    vhost: str
    source: str
    destination_kind: str  # "queue" or "exchange"
    destination: str
    binding_key: str = ""
    arguments: bytes = EMPTY_MAP


@command("metadata.unbind", version=1)
@dataclass(frozen=True, slots=True)
class Unbind(MetadataCommand):
    _PACKED: ClassVar[tuple[str, ...]] = ("arguments",)
    idempotency_key: str
    vhost: str
    source: str
    destination_kind: str
    destination: str
    binding_key: str = ""
    arguments: bytes = EMPTY_MAP


@command("metadata.set_policy", version=1)
@dataclass(frozen=True, slots=True)
class SetPolicy(MetadataCommand):
    """A policy: queues and exchanges whose name matches `pattern` take the
    keys of `definition` they were not declared with (node/vhosts/policies.py
    applies them, routing/policies.py decides which policy wins)."""

    _PACKED: ClassVar[tuple[str, ...]] = ("definition",)
    idempotency_key: str
    vhost: str
    name: str
    pattern: str
    apply_to: str = "all"
    definition: bytes = EMPTY_MAP
    priority: int = 0

    @property
    def definition_map(self) -> dict[str, Any]:
        return unpack(self.definition)


@command("metadata.clear_policy", version=1)
@dataclass(frozen=True, slots=True)
class ClearPolicy(MetadataCommand):
    idempotency_key: str
    vhost: str
    name: str


# -- limits --------------------------------------------------------------------


@command("metadata.set_limit", version=1)
@dataclass(frozen=True, slots=True)
class SetLimit(MetadataCommand):
    """A vhost or user limit, as RabbitMQ's `set_vhost_limits` and
    `set_user_limits`: scope "vhost" or "user", limit "max-connections";
    a negative value means no limit, 0 allows none."""

    idempotency_key: str
    scope: str
    name: str
    limit: str
    value: int


@command("metadata.clear_limit", version=1)
@dataclass(frozen=True, slots=True)
class ClearLimit(MetadataCommand):
    idempotency_key: str
    scope: str
    name: str
    limit: str


# -- operator policies and topic permissions ------------------------------------


@command("metadata.set_operator_policy", version=1)
@dataclass(frozen=True, slots=True)
class SetOperatorPolicy(SetPolicy):
    """An operator policy (RabbitMQ's): a policy's fields, kept apart from the
    users' policies, and its numeric limits cap what queues declare. Refused
    until the operator_policies feature flag is enabled."""


@command("metadata.clear_operator_policy", version=1)
@dataclass(frozen=True, slots=True)
class ClearOperatorPolicy(ClearPolicy):
    pass


@command("metadata.set_topic_permissions", version=1)
@dataclass(frozen=True, slots=True)
class SetTopicPermissions(MetadataCommand):
    """Refused until the topic_permissions feature flag is enabled."""

    idempotency_key: str
    user: str
    vhost: str
    exchange: str
    write: str = ".*"
    read: str = ".*"


@command("metadata.clear_topic_permissions", version=1)
@dataclass(frozen=True, slots=True)
class ClearTopicPermissions(MetadataCommand):
    """Clears one exchange's entry, or with exchange "" all of the user's in the vhost."""

    idempotency_key: str
    user: str
    vhost: str
    exchange: str = ""


# The global runtime parameters Warren keeps (RabbitMQ's usual ones): the
# cluster's name, which /api/overview and Prometheus report, and RabbitMQ's
# permanent cluster id, kept so that definitions carry it back.
GLOBAL_PARAMETER_NAMES = ("cluster_name", "internal_cluster_id")


@command("metadata.set_global_parameter", version=1)
@dataclass(frozen=True, slots=True)
class SetGlobalParameter(MetadataCommand):
    """A global runtime parameter (RabbitMQ's set_global_parameter): one of
    GLOBAL_PARAMETER_NAMES, a string. Refused until the global_parameters
    feature flag is enabled."""

    idempotency_key: str
    name: str
    value: str


# The vhost runtime parameter components kept as parameters (RabbitMQ's
# set_parameter): only `shovel` (node/shovel/). vhost-limits and
# operator_policy have their own commands (SetLimit, SetOperatorPolicy).
PARAMETER_COMPONENTS = ("shovel",)


@command("metadata.set_parameter", version=1)
@dataclass(frozen=True, slots=True)
class SetParameter(MetadataCommand):
    """A vhost runtime parameter (RabbitMQ's set_parameter) of a component in
    PARAMETER_COMPONENTS: `value` is its JSON text, checked before proposing
    (node/shovel/definition.py for a shovel). Refused until the shovels
    feature flag is enabled."""

    idempotency_key: str
    vhost: str
    component: str
    name: str
    value: str


@command("metadata.clear_parameter", version=1)
@dataclass(frozen=True, slots=True)
class ClearParameter(MetadataCommand):
    idempotency_key: str
    vhost: str
    component: str
    name: str


# -- cluster -------------------------------------------------------------------


@command("metadata.bootstrap", version=1)
@dataclass(frozen=True, slots=True)
class Bootstrap(MetadataCommand):
    """The defaults of a blank cluster: a vhost, a user, and that user's full
    permissions in it. Applied only while the store holds no vhost and no
    user, so every node may propose it at start and only the first counts
    (RabbitMQ creates its defaults only on a blank database)."""

    idempotency_key: str
    vhost: str
    vhost_description: str
    user: str
    password_hash: str
    tags: tuple[str, ...] = ()


@command("metadata.enable_feature_flag", version=1)
@dataclass(frozen=True, slots=True)
class EnableFeatureFlag(MetadataCommand):
    idempotency_key: str
    name: str


@command("metadata.add_member", version=1)
@dataclass(frozen=True, slots=True)
class AddMember(MetadataCommand):
    """Add a cluster member, or update one that restarted with another
    version: what it runs and the feature flags it supports
    (metadata/feature_flags.py `local_member`)."""

    idempotency_key: str
    node: str
    version: str
    supported_flags: tuple[str, ...] = ()


@command("metadata.remove_member", version=1)
@dataclass(frozen=True, slots=True)
class RemoveMember(MetadataCommand):
    idempotency_key: str
    node: str


@command("metadata.noop", version=1)  # the record's kind on the wire and in logs: unchanged
@dataclass(frozen=True, slots=True)
class Fence(MetadataCommand):
    """Changes nothing. Committing one is a fence (Khepri's): once it is
    applied here, every earlier command is too, so local reads that follow
    see them. (Not node/cluster/cluster.py's `Noop`, the cluster-level record
    `Cluster.fence()` commits, which never reaches this machine.)"""

    idempotency_key: str = ""


COMMANDS: tuple[type[MetadataCommand], ...] = (
    AddVHost, AddVHostWithQueueType, DeleteVHost, PutUser, DeleteUser, SetPermissions, ClearPermissions,
    DeclareExchange, DeleteExchange, DeclareQueue, DeleteQueue, Bind, Unbind,
    SetPolicy, ClearPolicy, EnableFeatureFlag, AddMember, RemoveMember, Fence, Bootstrap, SetQueueReplicas,
    SetLimit, ClearLimit,
    SetOperatorPolicy, ClearOperatorPolicy, SetTopicPermissions, ClearTopicPermissions,
    StreamElect, SetGlobalParameter, SetVHostDeletionProtection, DeclareQueueByUser, SetParameter, ClearParameter,
)  # fmt: skip


# -- field checks ----------------------------------------------------------------

_hint_cache: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _hint_cache.get(cls)
    if hints is None:
        all_hints = typing.get_type_hints(cls)
        hints = _hint_cache[cls] = {f.name: all_hints[f.name] for f in dataclasses.fields(cls)}
    return hints


def _conforms(value: Any, hint: Any) -> bool:
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:  # a long in the log: 64 bits, signed
        return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63
    if hint in (str, bytes):
        return isinstance(value, hint)
    if hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin is tuple:
        return isinstance(value, tuple) and all(isinstance(v, str) for v in value)
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, h) for h in typing.get_args(hint))
    return False


def check_fields(cmd: MetadataCommand) -> str | None:
    """A description of the first field whose value has the wrong type, or
    None. Records decoded from the log hold whatever the proposer put there;
    the machine answers a bad one with an error instead of failing."""
    for name, hint in _hints(type(cmd)).items():
        value = getattr(cmd, name)
        if not _conforms(value, hint):
            return f"field '{name}' of {type(cmd).__name__}: unexpected {type(value).__name__} {value!r:.60}"
    return None
