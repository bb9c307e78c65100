"""The local read models the hot paths use, kept in step with the metadata
machine and never reading Raft (RabbitMQ keeps ETS projections of Khepri for
the same reason).

- per vhost, a `RoutingTable` (routing/table.py) fed from exchanges,
  bindings and queues: the node routes a publish with it to queue names
  (`targets`: a tuple remembered per exchange and key until the table
  changes, routing/route_memo.py), then looks each name up once in its
  vhost's queue objects (node/vhosts/vhost.py), where a queue another node
  hosts is a proxy that knows its leader and replicas
  (node/vhosts/remote_queue.py): one lookup per target queue;
- users and permissions, readable with routing/users.py's Authenticator API
  (`users`, `permission(user, vhost)`), and pushed into an Authenticator
  when one is attached (so its password-check cache is invalidated too);
- vhosts, policies, enabled feature flags and members, for management.

Updated two ways that must agree (the property tests check they do):
incrementally, from each command's effects (`on_applied`), and wholesale,
from a state (`rebuild`, after a snapshot restore or at start). Effects may
repeat what an earlier effect of the same command already did (a deleted
queue's bindings, listed after the queue): applying one whose work is done
is a no-op.

`when_applied(index, callback)` lets a caller that knows the log index of
its write (a follower answering a client) wait until this node has applied
it: read-your-writes without reading Raft.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from metadata import effects as fx
from metadata.effects import Effect, Result
from metadata.state import MetadataState, VHostState
from routing.exchange_types import Choice
from routing.permissions import Permission
from routing.table import RESERVED_PREFIX, RoutingTable
from routing.users import Authenticator, User

__all__ = ["MemberInfo", "PolicyInfo", "Projections", "VHostInfo"]


@dataclass(frozen=True, slots=True)
class VHostInfo:
    name: str
    description: str = ""
    tags: tuple[str, ...] = ()
    default_queue_type: str = ""  # "" for none (classic)
    protected_from_deletion: bool = False


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    vhost: str
    name: str
    pattern: str
    apply_to: str
    definition: Mapping[str, Any]
    priority: int


@dataclass(frozen=True, slots=True)
class MemberInfo:
    node: str
    version: str
    supported_flags: tuple[str, ...] = ()


class Projections:
    """One node's read models of the metadata state."""

    def __init__(self, *, choice: Choice = random.choice, authenticator: Authenticator | None = None,
                 is_local: Callable[[str, str], bool] | None = None) -> None:  # fmt: skip
        self._choice = choice
        self._is_local = is_local  # (vhost, queue) -> on this node: x-local-random prefers those
        self.tables: dict[str, RoutingTable] = {}
        self.vhosts: dict[str, VHostInfo] = {}
        self.users: dict[str, User] = {}
        self.permissions: dict[tuple[str, str], Permission] = {}  # (user, vhost) ->
        self.policies: dict[tuple[str, str], PolicyInfo] = {}  # (vhost, name) ->
        self.operator_policies: dict[tuple[str, str], PolicyInfo] = {}  # (vhost, name) ->
        # (user, vhost, exchange) -> (write, read) patterns on topic routing keys
        self.topic_permissions: dict[tuple[str, str, str], tuple[str, str]] = {}
        self.feature_flags: set[str] = set()
        self.members: dict[str, MemberInfo] = {}
        self.limits: dict[tuple[str, str, str], int] = {}  # (scope "vhost" | "user", name, limit) -> value
        self.global_parameters: dict[str, str] = {}
        self.parameters: dict[tuple[str, str, str], str] = {}  # (vhost, component, name) -> JSON text
        self.applied_index = 0
        self._waiters: list[tuple[int, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self.authenticator: Authenticator | None = None
        if authenticator is not None:
            self.attach_authenticator(authenticator)

    @classmethod
    def from_state(cls, state: MetadataState, **kwargs: Any) -> Projections:
        projections = cls(**kwargs)
        projections.rebuild(state)
        return projections

    # -- reading (the hot paths) -----------------------------------------------------

    def table(self, vhost: str) -> RoutingTable | None:
        return self.tables.get(vhost)

    def permission(self, user: str, vhost: str) -> Permission | None:
        return self.permissions.get((user, vhost))

    def limit(self, scope: str, name: str, limit: str) -> int | None:
        """A vhost's or user's limit; None (or negative) is no limit."""
        return self.limits.get((scope, name, limit))

    # -- the machine's listener hooks --------------------------------------------------

    def on_applied(self, command: Any, result: Result, effects: tuple[Effect, ...], index: int) -> None:
        self.apply_effects(effects)
        self.applied_index = index
        self._wake()

    def on_restored(self, state: MetadataState) -> None:
        self.rebuild(state)

    def when_applied(self, index: int, callback: Callable[[], None]) -> None:
        """Call `callback` once the command at `index` is applied here (now if it is)."""
        if index <= self.applied_index:
            callback()
        else:
            heapq.heappush(self._waiters, (index, next(self._order), callback))

    def _wake(self) -> None:
        while self._waiters and self._waiters[0][0] <= self.applied_index:
            heapq.heappop(self._waiters)[2]()

    # -- incremental updates -----------------------------------------------------------

    def apply_effects(self, effects: Iterable[Effect]) -> None:
        for effect in effects:
            self._APPLY[type(effect)](self, effect)

    def _vhost_added(self, e: fx.VHostAdded | fx.VHostUpdated) -> None:
        self.vhosts[e.name] = VHostInfo(e.name, e.description, e.tags, e.default_queue_type, e.protected_from_deletion)
        if e.name not in self.tables:
            self.tables[e.name] = RoutingTable(e.name, choice=self._choice, is_local=self._is_local)

    def _vhost_deleted(self, e: fx.VHostDeleted) -> None:
        self.vhosts.pop(e.name, None)
        self.tables.pop(e.name, None)
        self.permissions = {k: v for k, v in self.permissions.items() if k[1] != e.name}
        self.policies = {k: v for k, v in self.policies.items() if k[0] != e.name}
        self.limits = {k: v for k, v in self.limits.items() if k[:2] != ("vhost", e.name)}
        self.operator_policies = {k: v for k, v in self.operator_policies.items() if k[0] != e.name}
        self.topic_permissions = {k: v for k, v in self.topic_permissions.items() if k[1] != e.name}
        if self.authenticator is not None:
            self.authenticator.vhost_deleted(e.name)

    def _exchange_declared(self, e: fx.ExchangeDeclared) -> None:
        self.tables[e.vhost].declare_exchange(e.name, e.type, durable=e.durable, auto_delete=e.auto_delete,
                                              internal=e.internal, arguments=e.arguments)  # fmt: skip

    def _exchange_deleted(self, e: fx.ExchangeDeleted) -> None:
        self.tables[e.vhost].delete_exchange(e.name)

    def _queue_declared(self, e: fx.QueueDeclared) -> None:
        self.tables[e.vhost].add_queue(e.name)

    def _queue_replicas(self, e: fx.QueueReplicasChanged) -> None:
        pass  # routing goes by name; the node's queue proxies follow replicas (node/vhosts/local_queues.py)

    def _queue_deleted(self, e: fx.QueueDeleted) -> None:
        table = self.tables.get(e.vhost)
        if table is not None:
            table.remove_queue(e.name)

    def _binding_added(self, e: fx.BindingAdded) -> None:
        self.tables[e.vhost].bind(e.source, e.destination_kind, e.destination, e.binding_key, e.arguments)

    def _binding_removed(self, e: fx.BindingRemoved) -> None:
        self.tables[e.vhost].unbind(e.source, e.destination_kind, e.destination, e.binding_key, e.arguments)

    def _user_put(self, e: fx.UserPut) -> None:
        self.users[e.name] = User(e.name, e.password_hash, list(e.tags))
        if self.authenticator is not None:
            self.authenticator.add_user(e.name, None, list(e.tags), password_hash=e.password_hash)

    def _user_deleted(self, e: fx.UserDeleted) -> None:
        self.users.pop(e.name, None)
        self.permissions = {k: v for k, v in self.permissions.items() if k[0] != e.name}
        self.limits = {k: v for k, v in self.limits.items() if k[:2] != ("user", e.name)}
        self.topic_permissions = {k: v for k, v in self.topic_permissions.items() if k[0] != e.name}
        if self.authenticator is not None:
            self.authenticator.delete_user(e.name)

    def _permissions_set(self, e: fx.PermissionsSet) -> None:
        self.permissions[(e.user, e.vhost)] = Permission(e.configure, e.write, e.read)
        if self.authenticator is not None:
            self.authenticator.set_permissions(e.user, e.vhost, e.configure, e.write, e.read)

    def _permissions_cleared(self, e: fx.PermissionsCleared) -> None:
        self.permissions.pop((e.user, e.vhost), None)
        if self.authenticator is not None:
            self.authenticator.clear_permissions(e.user, e.vhost)

    def _topic_permissions_set(self, e: fx.TopicPermissionsSet) -> None:
        self.topic_permissions[(e.user, e.vhost, e.exchange)] = (e.write, e.read)

    def _topic_permissions_cleared(self, e: fx.TopicPermissionsCleared) -> None:
        self.topic_permissions.pop((e.user, e.vhost, e.exchange), None)

    def _policy_set(self, e: fx.PolicySet) -> None:
        policies = self.operator_policies if e.operator else self.policies
        policies[(e.vhost, e.name)] = PolicyInfo(e.vhost, e.name, e.pattern, e.apply_to, e.definition, e.priority)

    def _policy_cleared(self, e: fx.PolicyCleared) -> None:
        (self.operator_policies if e.operator else self.policies).pop((e.vhost, e.name), None)

    def vhost_policies(self, vhost: str, operator: bool = False) -> list[PolicyInfo]:
        """The (operator) policies of one vhost, by name."""
        policies = self.operator_policies if operator else self.policies
        return sorted((p for (v, _), p in policies.items() if v == vhost), key=lambda p: p.name)

    def _global_parameter_set(self, e: fx.GlobalParameterSet) -> None:
        self.global_parameters[e.name] = e.value

    def _parameter_set(self, e: fx.ParameterSet) -> None:
        self.parameters[(e.vhost, e.component, e.name)] = e.value

    def _parameter_cleared(self, e: fx.ParameterCleared) -> None:
        self.parameters.pop((e.vhost, e.component, e.name), None)

    def _limit_set(self, e: fx.LimitSet) -> None:
        self.limits[(e.scope, e.name, e.limit)] = e.value

    def _limit_cleared(self, e: fx.LimitCleared) -> None:
        self.limits.pop((e.scope, e.name, e.limit), None)

    def _flag_enabled(self, e: fx.FeatureFlagEnabled) -> None:
        self.feature_flags.add(e.name)

    def _member_put(self, e: fx.MemberAdded | fx.MemberUpdated) -> None:
        self.members[e.node] = MemberInfo(e.node, e.version, e.supported_flags)

    def _member_removed(self, e: fx.MemberRemoved) -> None:
        self.members.pop(e.node, None)

    _APPLY: dict[type, Callable[[Projections, Any], None]] = {
        fx.VHostAdded: _vhost_added,
        fx.VHostUpdated: _vhost_added,
        fx.VHostDeleted: _vhost_deleted,
        fx.ExchangeDeclared: _exchange_declared,
        fx.ExchangeDeleted: _exchange_deleted,
        fx.QueueDeclared: _queue_declared,
        fx.QueueDeleted: _queue_deleted,
        fx.QueueReplicasChanged: _queue_replicas,
        fx.BindingAdded: _binding_added,
        fx.BindingRemoved: _binding_removed,
        fx.UserPut: _user_put,
        fx.UserDeleted: _user_deleted,
        fx.PermissionsSet: _permissions_set,
        fx.PermissionsCleared: _permissions_cleared,
        fx.PolicySet: _policy_set,
        fx.TopicPermissionsSet: _topic_permissions_set,
        fx.TopicPermissionsCleared: _topic_permissions_cleared,
        fx.PolicyCleared: _policy_cleared,
        fx.FeatureFlagEnabled: _flag_enabled,
        fx.MemberAdded: _member_put,
        fx.MemberUpdated: _member_put,
        fx.MemberRemoved: _member_removed,
        fx.LimitSet: _limit_set,
        fx.LimitCleared: _limit_cleared,
        fx.GlobalParameterSet: _global_parameter_set,
        fx.ParameterSet: _parameter_set,
        fx.ParameterCleared: _parameter_cleared,
    }

    # -- wholesale rebuild -------------------------------------------------------------

    def rebuild(self, state: MetadataState) -> None:
        """Replace every projection with one built from `state`."""
        self.tables, self.vhosts, self.policies, self.operator_policies = {}, {}, {}, {}
        for vh in state.vhosts.values():
            self._rebuild_vhost(vh)
        self.users = {u.name: User(u.name, u.password_hash, list(u.tags)) for u in state.users.values()}
        self.permissions = {k: Permission(p.configure, p.write, p.read) for k, p in state.permissions.items()}
        self.topic_permissions = {k: (t.write, t.read) for k, t in state.topic_permissions.items()}
        self.feature_flags = set(state.feature_flags)
        self.members = {m.node: MemberInfo(m.node, m.version, m.supported_flags) for m in state.members.values()}
        self.limits = {k: x.value for k, x in state.limits.items()}
        self.global_parameters = {p.name: p.value for p in state.global_parameters.values()}
        self.parameters = {k: p.value for k, p in state.parameters.items()}
        if self.authenticator is not None:
            self._sync_authenticator(self.authenticator)

    def _rebuild_vhost(self, vh: VHostState) -> None:
        name = vh.name
        r = vh.record
        self.vhosts[name] = VHostInfo(name, r.description, r.tags, r.default_queue_type, r.protected_from_deletion)
        table = self.tables[name] = RoutingTable(name, choice=self._choice, is_local=self._is_local)
        for q in vh.queues.values():
            table.add_queue(q.name)
        for x in vh.exchanges.values():
            if x.name and not x.name.startswith(RESERVED_PREFIX):  # built in: the table has its own
                table.declare_exchange(x.name, x.type, durable=x.durable, auto_delete=x.auto_delete,
                                       internal=x.internal, arguments=x.arguments_map)  # fmt: skip
        for b in vh.all_bindings():
            table.bind(b.source, b.destination_kind, b.destination, b.binding_key, b.arguments_map)
        for p in vh.policies.values():
            self.policies[(name, p.name)] = PolicyInfo(name, p.name, p.pattern, p.apply_to, p.definition_map,
                                                       p.priority)  # fmt: skip
        for p in vh.operator_policies.values():
            self.operator_policies[(name, p.name)] = PolicyInfo(name, p.name, p.pattern, p.apply_to, p.definition_map,
                                                                p.priority)  # fmt: skip

    # -- the node's Authenticator ------------------------------------------------------

    def attach_authenticator(self, authenticator: Authenticator) -> None:
        """Make `authenticator` hold exactly these users and permissions, and
        keep it so from now on."""
        self.authenticator = authenticator
        self._sync_authenticator(authenticator)

    def _sync_authenticator(self, auth: Authenticator) -> None:
        for name in [n for n in auth.users if n not in self.users]:
            auth.delete_user(name)
        for user in self.users.values():
            have = auth.users.get(user.name)
            if have is None or have.password_hash != user.password_hash or have.tags != user.tags:
                auth.add_user(user.name, None, list(user.tags), password_hash=user.password_hash)
        auth.permissions = dict(self.permissions)
