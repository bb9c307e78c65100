"""What applying a metadata command answers (results) and asks of the nodes
(effects). Both are frozen data, never exceptions or callbacks.

Results are explicit values: `Ok` (nothing new: an equivalent redeclare, a
change to something that existed, an idempotent no-op), `Created` (something
came into existence) or `Error(condition, description)` with the AMQP
condition the caller reports (amqp/errors.py: not-found, precondition-
failed, invalid-field, not-allowed, resource-locked, not-implemented).

Effects describe what every node must do locally once the command is
applied: update its projections (metadata/projections.py), start or stop a
queue it leads or replicates, close the connections of a deleted vhost or
user. Cascades are spelled out (deleting a queue lists the bindings it took
with it, and the auto-delete exchanges that went with those) so a consumer
of effects never re-derives the rules; an effect that finds its work already
done is a no-op (the projections rely on that).

Effect arguments are the decoded AMQP maps, read-only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from amqp.errors import Condition

__all__ = [
    "CREATED",
    "OK",
    "BindingAdded",
    "BindingRemoved",
    "Created",
    "Effect",
    "Error",
    "ExchangeDeclared",
    "ExchangeDeleted",
    "FeatureFlagEnabled",
    "GlobalParameterSet",
    "ParameterCleared",
    "ParameterSet",
    "MemberAdded",
    "MemberRemoved",
    "MemberUpdated",
    "Ok",
    "LimitCleared",
    "LimitSet",
    "PermissionsCleared",
    "PermissionsSet",
    "PolicyCleared",
    "PolicySet",
    "QueueDeclared",
    "QueueDeleted",
    "QueueReplicasChanged",
    "TopicPermissionsCleared",
    "TopicPermissionsSet",
    "Result",
    "UserDeleted",
    "UserPut",
    "VHostAdded",
    "VHostDeleted",
    "VHostUpdated",
    "error",
]

# -- results ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ok:
    ok = True


@dataclass(frozen=True, slots=True)
class Created:
    ok = True


@dataclass(frozen=True, slots=True)
class Error:
    condition: str
    description: str
    ok = False


Result = Ok | Created | Error
OK = Ok()
CREATED = Created()


def error(condition: str, description: str) -> Error:
    return Error(condition, description)


NOT_FOUND = Condition.NOT_FOUND
PRECONDITION_FAILED = Condition.PRECONDITION_FAILED
INVALID_FIELD = Condition.INVALID_FIELD
NOT_ALLOWED = Condition.NOT_ALLOWED
RESOURCE_LOCKED = Condition.RESOURCE_LOCKED
RESOURCE_LIMIT_EXCEEDED = Condition.RESOURCE_LIMIT_EXCEEDED
NOT_IMPLEMENTED = Condition.NOT_IMPLEMENTED
INTERNAL_ERROR = Condition.INTERNAL_ERROR


# -- effects ---------------------------------------------------------------------


def _args() -> Any:
    return field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True)
class VHostAdded:
    name: str
    description: str = ""
    tags: tuple[str, ...] = ()
    default_queue_type: str = ""
    protected_from_deletion: bool = False  # never, for a new vhost: VHostUpdated's shape


@dataclass(frozen=True, slots=True)
class VHostUpdated:
    name: str
    description: str = ""
    tags: tuple[str, ...] = ()
    default_queue_type: str = ""
    protected_from_deletion: bool = False


@dataclass(frozen=True, slots=True)
class VHostDeleted:
    """Close the vhost's connections, drop everything local to it. Its queues
    were each announced by a QueueDeleted just before; its exchanges,
    bindings, policies and permissions go without one effect each."""

    name: str


@dataclass(frozen=True, slots=True)
class UserPut:
    """A user was created or replaced (its cached password checks are stale)."""

    name: str
    password_hash: str
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class UserDeleted:
    """Close the user's connections; its permissions went with it."""

    name: str


@dataclass(frozen=True, slots=True)
class PermissionsSet:
    user: str
    vhost: str
    configure: str
    write: str
    read: str


@dataclass(frozen=True, slots=True)
class PermissionsCleared:
    user: str
    vhost: str


@dataclass(frozen=True, slots=True)
class TopicPermissionsSet:
    user: str
    vhost: str
    exchange: str
    write: str
    read: str


@dataclass(frozen=True, slots=True)
class TopicPermissionsCleared:
    user: str
    vhost: str
    exchange: str


@dataclass(frozen=True, slots=True)
class ExchangeDeclared:
    vhost: str
    name: str
    type: str
    durable: bool = True
    auto_delete: bool = False
    internal: bool = False
    arguments: Mapping[str, Any] = _args()


@dataclass(frozen=True, slots=True)
class ExchangeDeleted:
    """Deleted on request, or auto-deleted when its last binding went."""

    vhost: str
    name: str


@dataclass(frozen=True, slots=True)
class QueueDeclared:
    """The leader starts the queue; replicas start their copy."""

    vhost: str
    name: str
    type: str
    durable: bool
    auto_delete: bool
    exclusive_owner: str | None
    arguments: Mapping[str, Any]
    leader: str
    replicas: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class QueueReplicasChanged:
    """Added members start their copy and catch up; removed ones drop theirs."""

    vhost: str
    name: str
    type: str
    leader: str
    replicas: tuple[str, ...]
    previous: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class QueueDeleted:
    """The leader and replicas drop the queue and its messages, detaching
    its consumers (resource-deleted)."""

    vhost: str
    name: str
    type: str
    leader: str
    replicas: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class BindingAdded:
    vhost: str
    source: str
    destination_kind: str
    destination: str
    binding_key: str = ""
    arguments: Mapping[str, Any] = _args()


@dataclass(frozen=True, slots=True)
class BindingRemoved:
    vhost: str
    source: str
    destination_kind: str
    destination: str
    binding_key: str = ""
    arguments: Mapping[str, Any] = _args()


@dataclass(frozen=True, slots=True)
class PolicySet:
    vhost: str
    name: str
    pattern: str
    apply_to: str
    definition: Mapping[str, Any]
    priority: int
    operator: bool = False  # an operator policy (SetOperatorPolicy)


@dataclass(frozen=True, slots=True)
class PolicyCleared:
    vhost: str
    name: str
    operator: bool = False


@dataclass(frozen=True, slots=True)
class LimitSet:
    scope: str  # "vhost" or "user"
    name: str
    limit: str
    value: int


@dataclass(frozen=True, slots=True)
class LimitCleared:
    scope: str
    name: str
    limit: str


@dataclass(frozen=True, slots=True)
class FeatureFlagEnabled:
    name: str


@dataclass(frozen=True, slots=True)
class MemberAdded:
    node: str
    version: str
    supported_flags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MemberUpdated:
    node: str
    version: str
    supported_flags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MemberRemoved:
    node: str


@dataclass(frozen=True, slots=True)
class GlobalParameterSet:
    name: str
    value: str


@dataclass(frozen=True, slots=True)
class ParameterSet:
    vhost: str
    component: str
    name: str
    value: str  # JSON text


@dataclass(frozen=True, slots=True)
class ParameterCleared:
    vhost: str
    component: str
    name: str


Effect = (
    VHostAdded | VHostUpdated | VHostDeleted | UserPut | UserDeleted | PermissionsSet | PermissionsCleared
    | ExchangeDeclared | ExchangeDeleted | QueueDeclared | QueueDeleted | BindingAdded | BindingRemoved
    | PolicySet | PolicyCleared | FeatureFlagEnabled | MemberAdded | MemberUpdated | MemberRemoved
    | LimitSet | LimitCleared | GlobalParameterSet | ParameterSet | ParameterCleared
    | TopicPermissionsSet | TopicPermissionsCleared
)  # fmt: skip
