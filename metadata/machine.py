"""The metadata state machine: `apply(state, command) -> (state, result,
effects)`, and `MetadataMachine`, the raft/group.py Machine around it.

`apply` is pure (STYLE.md rule 4): no clock, no randomness, no I/O; the same
commands in the same order give the same states, results, effects and
snapshot bytes on every member. It never raises: a refused command is an
`Error` result and leaves the state as it was; so does a bug (internal-error),
since the state it started from is immutable and simply kept.

Idempotency: a command with a non-empty `idempotency_key` is applied at most
once. The key is remembered with a digest of the command and its result in
a bounded map inside the state (MetadataState.recent); the same command under
the same key is answered with the first result and changes nothing; another
command under a remembered key is refused (precondition-failed), since it is
a proposer's bug that would otherwise be silently dropped.

Validation follows RabbitMQ (and Warren's single-node behaviour): missing
vhost, exchange, queue or user -> not-found; inequivalent redeclare ->
precondition-failed; deleting a user takes its permissions; deleting a vhost
takes everything in it and its permissions. The topology rules are in
metadata/topology.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from collections.abc import Callable
from typing import Any

from metadata import commands as c
from metadata import effects as fx
from metadata import topology
from metadata.effects import CREATED, OK, Effect, Error, Result
from metadata.feature_flags import (
    GLOBAL_PARAMETERS,
    OPERATOR_POLICIES,
    SHOVELS,
    TOPIC_PERMISSIONS,
    VHOST_DEFAULT_QUEUE_TYPE,
    VHOST_DELETION_PROTECTION,
    VHOST_MAX_QUEUES,
)
from metadata.snapshot import decode_state, encode_state
from metadata.state import (
    GlobalParameterRecord,
    LimitRecord,
    MemberRecord,
    MetadataState,
    ParameterRecord,
    PermissionRecord,
    PolicyRecord,
    TopicPermissionRecord,
    UserRecord,
    VHostRecord,
    VHostState,
)
from metadata.topology import Outcome, Refused, vhost_of
from raft import records

__all__ = ["MetadataMachine", "apply"]

log = logging.getLogger(__name__)

POLICY_TARGETS = ("all", "queues", "exchanges", "classic_queues", "quorum_queues", "streams")


def apply(state: MetadataState, command: Any) -> tuple[MetadataState, Result, tuple[Effect, ...]]:
    """Apply one command to `state`; never raises."""
    handler = _HANDLERS.get(type(command))
    if handler is None:
        return state, Error(fx.NOT_IMPLEMENTED, f"not a metadata command: {type(command).__name__}"), ()
    key = command.idempotency_key
    problem = c.check_fields(command)
    if problem is not None:
        # Not remembered: a key of the wrong type cannot be, and one bad
        # field makes the whole record suspect.
        return state, Error(fx.INVALID_FIELD, problem), ()
    try:
        digest = hashlib.blake2b(records.encode(command), digest_size=16).digest() if key else b""
    except records.RecordError as e:  # a value check_fields let through but the codec refuses
        return state, Error(fx.INVALID_FIELD, str(e)), ()
    if key:
        seen = state.recent_result(key)
        if seen is not None:
            if seen.digest == digest:
                return state, seen.result, ()
            return state, Error(fx.PRECONDITION_FAILED, f"idempotency key {key!r} was used for another command"), ()
    try:
        new_state, result, effects = handler(state, command)
    except Refused as e:
        new_state, result, effects = state, Error(e.condition, e.description), ()
    except Exception as e:  # a bug: report it, keep the state it started from
        new_state, result, effects = state, Error(fx.INTERNAL_ERROR, f"{type(e).__name__}: {e}"), ()
    if key:
        new_state = new_state.remember(key, digest, result)
    return new_state, result, effects


# -- vhosts ----------------------------------------------------------------------


def _check_name(name: str, what: str) -> None:
    if not name:
        raise Refused(fx.INVALID_FIELD, f"empty {what} name")


def _add_vhost(state: MetadataState, cmd: c.AddVHost | c.AddVHostWithQueueType) -> Outcome:
    _check_name(cmd.name, "vhost")
    vh = state.vhosts.get(cmd.name)
    if isinstance(cmd, c.AddVHostWithQueueType):
        if VHOST_DEFAULT_QUEUE_TYPE not in state.feature_flags:
            raise Refused(fx.PRECONDITION_FAILED,
                          f"a vhost's default queue type needs the feature flag {VHOST_DEFAULT_QUEUE_TYPE}")  # fmt: skip
        if cmd.default_queue_type not in ("", *topology.QUEUE_TYPES):
            raise Refused(fx.INVALID_FIELD, f"default_queue_type '{cmd.default_queue_type}' is not one of "
                                            f"{', '.join(topology.QUEUE_TYPES)}")  # fmt: skip
        queue_type = cmd.default_queue_type
    else:  # version 1 does not know the field: it stays as it was
        queue_type = vh.record.default_queue_type if vh is not None else ""
    protected = vh is not None and vh.record.protected_from_deletion  # only its own command changes it
    record = VHostRecord(cmd.name, cmd.description, cmd.tags, queue_type, protected)
    if vh is None:
        return state.with_vhost(VHostState.new(record)), CREATED, (fx.VHostAdded(cmd.name, cmd.description, cmd.tags,
                                                                                  queue_type),)  # fmt: skip
    if vh.record == record:
        return state, OK, ()
    return state.with_vhost(vh.replace(record=record)), OK, (_vhost_updated(record),)


def _vhost_updated(record: VHostRecord) -> fx.VHostUpdated:
    return fx.VHostUpdated(record.name, record.description, record.tags, record.default_queue_type,
                           record.protected_from_deletion)  # fmt: skip


def _set_vhost_deletion_protection(state: MetadataState, cmd: c.SetVHostDeletionProtection) -> Outcome:
    if VHOST_DELETION_PROTECTION not in state.feature_flags:
        raise Refused(fx.PRECONDITION_FAILED,
                      f"protecting a vhost from deletion needs the feature flag {VHOST_DELETION_PROTECTION}")  # fmt: skip
    vh = vhost_of(state, cmd.name)
    if vh.record.protected_from_deletion == cmd.protected:
        return state, OK, ()
    record = dataclasses.replace(vh.record, protected_from_deletion=cmd.protected)
    return state.with_vhost(vh.replace(record=record)), OK, (_vhost_updated(record),)


def _delete_vhost(state: MetadataState, cmd: c.DeleteVHost) -> Outcome:
    vh = vhost_of(state, cmd.name)
    if vh.record.protected_from_deletion:  # RabbitMQ's rabbit_vhost:delete refuses it likewise
        raise Refused(fx.PRECONDITION_FAILED,
                      f"Refusing to delete virtual host '{cmd.name}' because it is protected from deletion")  # fmt: skip
    effects: list[Effect] = [topology.queue_deleted(q) for q in vh.queues.values()]
    effects.append(fx.VHostDeleted(cmd.name))
    permissions = state.permissions
    for key in [k for k in permissions if k[1] == cmd.name]:
        permissions = permissions.discard(key)
    topic = state.topic_permissions
    for key in [k for k in topic if k[1] == cmd.name]:
        topic = topic.discard(key)
    parameters = state.parameters
    for key in [k for k in parameters if k[0] == cmd.name]:  # a deleted vhost takes its shovels with it
        parameters = parameters.discard(key)
        effects.append(fx.ParameterCleared(*key))
    new = state.replace(vhosts=state.vhosts.discard(cmd.name), permissions=permissions, topic_permissions=topic,
                        parameters=parameters)  # fmt: skip
    return _without_limits(new, "vhost", cmd.name), OK, tuple(effects)


# -- users and permissions ---------------------------------------------------------


def _put_user(state: MetadataState, cmd: c.PutUser) -> Outcome:
    _check_name(cmd.name, "user")
    record = UserRecord(cmd.name, cmd.password_hash, cmd.tags)
    current = state.users.get(cmd.name)
    if current == record:
        return state, OK, ()
    effect = fx.UserPut(cmd.name, cmd.password_hash, cmd.tags)
    return state.replace(users=state.users.set(cmd.name, record)), CREATED if current is None else OK, (effect,)


def _delete_user(state: MetadataState, cmd: c.DeleteUser) -> Outcome:
    if cmd.name not in state.users:
        raise Refused(fx.NOT_FOUND, f"no user '{cmd.name}'")
    permissions = state.permissions
    for key in [k for k in permissions if k[0] == cmd.name]:
        permissions = permissions.discard(key)
    topic = state.topic_permissions
    for key in [k for k in topic if k[0] == cmd.name]:
        topic = topic.discard(key)
    new = state.replace(users=state.users.discard(cmd.name), permissions=permissions, topic_permissions=topic)
    new = _without_limits(new, "user", cmd.name)
    return new, OK, (fx.UserDeleted(cmd.name),)


def _user_and_vhost(state: MetadataState, user: str, vhost: str) -> None:
    if user not in state.users:
        raise Refused(fx.NOT_FOUND, f"no user '{user}'")
    vhost_of(state, vhost)


def _set_permissions(state: MetadataState, cmd: c.SetPermissions) -> Outcome:
    _user_and_vhost(state, cmd.user, cmd.vhost)
    for kind in ("configure", "write", "read"):
        _check_regex(getattr(cmd, kind), f"{kind} permission")
    record = PermissionRecord(cmd.user, cmd.vhost, cmd.configure, cmd.write, cmd.read)
    current = state.permissions.get((cmd.user, cmd.vhost))
    if current == record:
        return state, OK, ()
    effect = fx.PermissionsSet(cmd.user, cmd.vhost, cmd.configure, cmd.write, cmd.read)
    new = state.replace(permissions=state.permissions.set((cmd.user, cmd.vhost), record))
    return new, CREATED if current is None else OK, (effect,)


def _clear_permissions(state: MetadataState, cmd: c.ClearPermissions) -> Outcome:
    _user_and_vhost(state, cmd.user, cmd.vhost)
    if (cmd.user, cmd.vhost) not in state.permissions:
        return state, OK, ()
    new = state.replace(permissions=state.permissions.discard((cmd.user, cmd.vhost)))
    return new, OK, (fx.PermissionsCleared(cmd.user, cmd.vhost),)


def _set_topic_permissions(state: MetadataState, cmd: c.SetTopicPermissions) -> Outcome:
    if TOPIC_PERMISSIONS not in state.feature_flags:
        raise Refused(fx.PRECONDITION_FAILED, f"topic permissions need the feature flag {TOPIC_PERMISSIONS}")
    _user_and_vhost(state, cmd.user, cmd.vhost)
    for kind in ("write", "read"):
        _check_regex(getattr(cmd, kind), f"{kind} topic permission")
    key = (cmd.user, cmd.vhost, cmd.exchange)
    record = TopicPermissionRecord(cmd.user, cmd.vhost, cmd.exchange, cmd.write, cmd.read)
    current = state.topic_permissions.get(key)
    if current == record:
        return state, OK, ()
    effect = fx.TopicPermissionsSet(cmd.user, cmd.vhost, cmd.exchange, cmd.write, cmd.read)
    new = state.replace(topic_permissions=state.topic_permissions.set(key, record))
    return new, CREATED if current is None else OK, (effect,)


def _clear_topic_permissions(state: MetadataState, cmd: c.ClearTopicPermissions) -> Outcome:
    _user_and_vhost(state, cmd.user, cmd.vhost)
    keys = [k for k in state.topic_permissions if k[:2] == (cmd.user, cmd.vhost)
            and (not cmd.exchange or k[2] == cmd.exchange)]  # fmt: skip
    if not keys:
        raise Refused(fx.NOT_FOUND, f"no topic permissions for user '{cmd.user}' in vhost '{cmd.vhost}'")
    topic = state.topic_permissions
    for key in keys:
        topic = topic.discard(key)
    return state.replace(topic_permissions=topic), OK, tuple(fx.TopicPermissionsCleared(*k) for k in keys)


def _check_regex(pattern: str, what: str) -> None:
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as e:
        raise Refused(fx.INVALID_FIELD, f"invalid {what} pattern {pattern!r}: {e}") from None


# -- policies ----------------------------------------------------------------------


def _set_policy(state: MetadataState, cmd: c.SetPolicy | c.SetOperatorPolicy) -> Outcome:
    operator = isinstance(cmd, c.SetOperatorPolicy)
    if operator and OPERATOR_POLICIES not in state.feature_flags:
        raise Refused(fx.PRECONDITION_FAILED, f"operator policies need the feature flag {OPERATOR_POLICIES}")
    vh = vhost_of(state, cmd.vhost)
    _check_name(cmd.name, "policy")
    _check_regex(cmd.pattern, "policy")
    if cmd.apply_to not in POLICY_TARGETS:
        raise Refused(fx.INVALID_FIELD, f"policy apply-to '{cmd.apply_to}' is not one of {', '.join(POLICY_TARGETS)}")
    definition = topology.arguments_of(cmd.definition, f"definition of policy '{cmd.name}'")
    if not definition:
        raise Refused(fx.INVALID_FIELD, f"policy '{cmd.name}' has an empty definition")
    if cmd.priority < 0:
        raise Refused(fx.INVALID_FIELD, f"policy priority must be a non-negative integer, got {cmd.priority}")
    record = PolicyRecord(cmd.vhost, cmd.name, cmd.pattern, cmd.apply_to, cmd.definition, cmd.priority)
    policies = vh.operator_policies if operator else vh.policies
    current = policies.get(cmd.name)
    if current == record:
        return state, OK, ()
    effect = fx.PolicySet(cmd.vhost, cmd.name, cmd.pattern, cmd.apply_to, topology.frozen_map(definition),
                          cmd.priority, operator)  # fmt: skip
    policies = policies.set(cmd.name, record)
    new = state.with_vhost(vh.replace(operator_policies=policies) if operator else vh.replace(policies=policies))
    return new, CREATED if current is None else OK, (effect,)


def _clear_policy(state: MetadataState, cmd: c.ClearPolicy | c.ClearOperatorPolicy) -> Outcome:
    operator = isinstance(cmd, c.ClearOperatorPolicy)
    vh = vhost_of(state, cmd.vhost)
    policies = vh.operator_policies if operator else vh.policies
    if cmd.name not in policies:
        kind = "operator policy" if operator else "policy"
        raise Refused(fx.NOT_FOUND, f"no {kind} '{cmd.name}' in vhost '{cmd.vhost}'")
    policies = policies.discard(cmd.name)
    new = state.with_vhost(vh.replace(operator_policies=policies) if operator else vh.replace(policies=policies))
    return new, OK, (fx.PolicyCleared(cmd.vhost, cmd.name, operator),)


# -- limits --------------------------------------------------------------------------

# What each scope may limit, as RabbitMQ's vhost and user limits; only what
# the node enforces is accepted.
LIMITS = {"vhost": ("max-connections", "max-queues"), "user": ("max-connections",)}


def _check_limit(state: MetadataState, scope: str, name: str, limit: str) -> None:
    if scope not in LIMITS:
        raise Refused(fx.INVALID_FIELD, f"unknown limit scope '{scope}'")
    if limit not in LIMITS[scope]:
        raise Refused(fx.INVALID_FIELD, f"unknown {scope} limit '{limit}' (known: {', '.join(LIMITS[scope])})")
    if scope == "vhost":
        vhost_of(state, name)
    elif name not in state.users:
        raise Refused(fx.NOT_FOUND, f"no user '{name}'")


def _set_limit(state: MetadataState, cmd: c.SetLimit) -> Outcome:
    _check_limit(state, cmd.scope, cmd.name, cmd.limit)
    if cmd.limit == "max-queues" and VHOST_MAX_QUEUES not in state.feature_flags:
        raise Refused(fx.PRECONDITION_FAILED, f"the max-queues limit needs the feature flag {VHOST_MAX_QUEUES}")
    key = (cmd.scope, cmd.name, cmd.limit)
    record = LimitRecord(cmd.scope, cmd.name, cmd.limit, cmd.value)
    current = state.limits.get(key)
    if current == record:
        return state, OK, ()
    new = state.replace(limits=state.limits.set(key, record))
    return new, CREATED if current is None else OK, (fx.LimitSet(cmd.scope, cmd.name, cmd.limit, cmd.value),)


def _clear_limit(state: MetadataState, cmd: c.ClearLimit) -> Outcome:
    _check_limit(state, cmd.scope, cmd.name, cmd.limit)
    key = (cmd.scope, cmd.name, cmd.limit)
    if key not in state.limits:
        raise Refused(fx.NOT_FOUND, f"no {cmd.limit} limit on {cmd.scope} '{cmd.name}'")
    return state.replace(limits=state.limits.discard(key)), OK, (fx.LimitCleared(cmd.scope, cmd.name, cmd.limit),)


def _without_limits(state: MetadataState, scope: str, name: str) -> MetadataState:
    """A deleted vhost or user takes its limits with it."""
    limits = state.limits
    for key in [k for k in limits if k[0] == scope and k[1] == name]:
        limits = limits.discard(key)
    return state.replace(limits=limits) if limits is not state.limits else state


# -- global parameters ---------------------------------------------------------------


def _set_global_parameter(state: MetadataState, cmd: c.SetGlobalParameter) -> Outcome:
    if GLOBAL_PARAMETERS not in state.feature_flags:
        raise Refused(fx.PRECONDITION_FAILED, f"global parameters need the feature flag {GLOBAL_PARAMETERS}")
    if cmd.name not in c.GLOBAL_PARAMETER_NAMES:
        raise Refused(fx.INVALID_FIELD, f"unknown global parameter '{cmd.name}' (known: "
                                        f"{', '.join(c.GLOBAL_PARAMETER_NAMES)})")  # fmt: skip
    record = GlobalParameterRecord(cmd.name, cmd.value)
    current = state.global_parameters.get(cmd.name)
    if current == record:
        return state, OK, ()
    new = state.replace(global_parameters=state.global_parameters.set(cmd.name, record))
    return new, CREATED if current is None else OK, (fx.GlobalParameterSet(cmd.name, cmd.value),)


# -- vhost runtime parameters (shovels) ----------------------------------------------


def _check_parameter(state: MetadataState, vhost: str, component: str, name: str) -> None:
    if SHOVELS not in state.feature_flags:
        raise Refused(fx.PRECONDITION_FAILED, f"runtime parameters need the feature flag {SHOVELS}")
    if component not in c.PARAMETER_COMPONENTS:
        raise Refused(fx.INVALID_FIELD, f"unknown parameter component '{component}' (known: "
                                        f"{', '.join(c.PARAMETER_COMPONENTS)})")  # fmt: skip
    _check_name(name, "parameter")
    vhost_of(state, vhost)


def _set_parameter(state: MetadataState, cmd: c.SetParameter) -> Outcome:
    _check_parameter(state, cmd.vhost, cmd.component, cmd.name)
    key = (cmd.vhost, cmd.component, cmd.name)
    record = ParameterRecord(cmd.vhost, cmd.component, cmd.name, cmd.value)
    current = state.parameters.get(key)
    if current == record:
        return state, OK, ()
    new = state.replace(parameters=state.parameters.set(key, record))
    return new, CREATED if current is None else OK, (fx.ParameterSet(*key, cmd.value),)


def _clear_parameter(state: MetadataState, cmd: c.ClearParameter) -> Outcome:
    _check_parameter(state, cmd.vhost, cmd.component, cmd.name)
    key = (cmd.vhost, cmd.component, cmd.name)
    if key not in state.parameters:
        raise Refused(fx.NOT_FOUND, f"no {cmd.component} parameter '{cmd.name}' in vhost '{cmd.vhost}'")
    return state.replace(parameters=state.parameters.discard(key)), OK, (fx.ParameterCleared(*key),)


# -- cluster -------------------------------------------------------------------------


def _enable_feature_flag(state: MetadataState, cmd: c.EnableFeatureFlag) -> Outcome:
    _check_name(cmd.name, "feature flag")
    if cmd.name in state.feature_flags:
        return state, OK, ()
    if not state.members:
        raise Refused(fx.PRECONDITION_FAILED, f"feature flag '{cmd.name}': the cluster has no members")
    lacking = sorted(m.node for m in state.members.values() if cmd.name not in m.supported_flags)
    if lacking:
        raise Refused(fx.PRECONDITION_FAILED,
                      f"feature flag '{cmd.name}' is not supported by {', '.join(lacking)}")  # fmt: skip
    flags = tuple(sorted((*state.feature_flags, cmd.name)))
    return state.replace(feature_flags=flags), CREATED, (fx.FeatureFlagEnabled(cmd.name),)


def _add_member(state: MetadataState, cmd: c.AddMember) -> Outcome:
    _check_name(cmd.node, "member")
    supported = tuple(sorted(set(cmd.supported_flags)))
    missing = [f for f in state.feature_flags if f not in supported]
    if missing:
        raise Refused(fx.PRECONDITION_FAILED,
                      f"node '{cmd.node}' does not support enabled feature flag(s) {', '.join(missing)}")  # fmt: skip
    record = MemberRecord(cmd.node, cmd.version, supported)
    current = state.members.get(cmd.node)
    if current == record:
        return state, OK, ()
    new = state.replace(members=state.members.set(cmd.node, record))
    if current is None:
        return new, CREATED, (fx.MemberAdded(cmd.node, cmd.version, supported),)
    return new, OK, (fx.MemberUpdated(cmd.node, cmd.version, supported),)


def _remove_member(state: MetadataState, cmd: c.RemoveMember) -> Outcome:
    if cmd.node not in state.members:
        raise Refused(fx.NOT_FOUND, f"no cluster member '{cmd.node}'")
    return state.replace(members=state.members.discard(cmd.node)), OK, (fx.MemberRemoved(cmd.node),)


def _fence(state: MetadataState, cmd: c.Fence) -> Outcome:
    return state, OK, ()


def _bootstrap(state: MetadataState, cmd: c.Bootstrap) -> Outcome:
    if state.vhosts or state.users:
        return state, OK, ()  # not blank: someone bootstrapped it, or an operator set it up
    effects: list[Effect] = []
    for step in (
        c.AddVHost("", cmd.vhost, cmd.vhost_description),
        c.PutUser("", cmd.user, cmd.password_hash, cmd.tags),
        c.SetPermissions("", cmd.user, cmd.vhost),
    ):
        state, _, done = _HANDLERS[type(step)](state, step)
        effects.extend(done)
    return state, CREATED, tuple(effects)


_HANDLERS: dict[type, Callable[[MetadataState, Any], Outcome]] = {
    c.AddVHost: _add_vhost,
    c.AddVHostWithQueueType: _add_vhost,
    c.DeleteVHost: _delete_vhost,
    c.PutUser: _put_user,
    c.DeleteUser: _delete_user,
    c.SetPermissions: _set_permissions,
    c.ClearPermissions: _clear_permissions,
    c.DeclareExchange: topology.declare_exchange,
    c.DeleteExchange: topology.delete_exchange,
    c.DeclareQueue: topology.declare_queue,
    c.DeclareQueueByUser: topology.declare_queue,
    c.DeleteQueue: topology.delete_queue,
    c.Bind: topology.bind,
    c.Unbind: topology.unbind,
    c.SetPolicy: _set_policy,
    c.ClearPolicy: _clear_policy,
    c.SetOperatorPolicy: _set_policy,
    c.ClearOperatorPolicy: _clear_policy,
    c.SetTopicPermissions: _set_topic_permissions,
    c.ClearTopicPermissions: _clear_topic_permissions,
    c.EnableFeatureFlag: _enable_feature_flag,
    c.AddMember: _add_member,
    c.RemoveMember: _remove_member,
    c.Fence: _fence,
    c.Bootstrap: _bootstrap,
    c.SetQueueReplicas: topology.set_queue_replicas,
    c.StreamElect: topology.stream_elect,
    c.SetLimit: _set_limit,
    c.ClearLimit: _clear_limit,
    c.SetGlobalParameter: _set_global_parameter,
    c.SetVHostDeletionProtection: _set_vhost_deletion_protection,
    c.SetParameter: _set_parameter,
    c.ClearParameter: _clear_parameter,
}
assert set(_HANDLERS) == set(c.COMMANDS)


# -- the Raft machine -----------------------------------------------------------------

Listener = Callable[[Any, Result, tuple[Effect, ...], int], None]


class MetadataMachine:
    """raft/group.py's Machine for the metadata group.

    `on_applied(command, result, effects, index)` runs after each command,
    before its result goes back to the proposer, so a proposer reading the
    node's projections after its callback sees its own write (read your
    writes). `on_restored(state)` runs after a snapshot replaced the state:
    rebuild the projections from it. A listener that raises is logged and
    does not undo or repeat the apply.
    """

    def __init__(
        self,
        state: MetadataState | None = None,
        *,
        on_applied: Listener | None = None,
        on_restored: Callable[[MetadataState], None] | None = None,
    ) -> None:
        self.state = state if state is not None else MetadataState()
        self.last_index = 0  # of the last command applied; 0 after a restore until the next one
        self._on_applied: list[Listener] = [on_applied] if on_applied is not None else []
        self._on_restored: list[Callable[[MetadataState], None]] = [on_restored] if on_restored is not None else []

    def subscribe(self, on_applied: Listener | None = None,
                  on_restored: Callable[[MetadataState], None] | None = None) -> None:  # fmt: skip
        if on_applied is not None:
            self._on_applied.append(on_applied)
        if on_restored is not None:
            self._on_restored.append(on_restored)

    def apply(self, record: Any, index: int) -> Result:
        self.state, result, effects = apply(self.state, record)
        self.last_index = index
        for listener in self._on_applied:
            try:
                listener(record, result, effects, index)
            except Exception:
                log.exception("metadata listener failed on index %d", index)
        return result

    def snapshot(self) -> bytes:
        return encode_state(self.state)

    def restore(self, data: bytes) -> None:
        self.state = decode_state(data)  # SnapshotFormatError leaves the old state
        self.last_index = 0
        for listener in self._on_restored:
            try:
                listener(self.state)
            except Exception:
                log.exception("metadata listener failed on restore")
