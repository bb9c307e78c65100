"""Exchanges, queues and bindings in the metadata state: the rules of
routing/table.py, applied to immutable records.

The local `RoutingTable` projections (metadata/projections.py) must end up
exactly as the state says, so these rules mirror the table's, check for
check and in the same order: built-in exchanges ("" and amq.*) can be neither
created nor deleted; a redeclare must be equivalent (type, durable,
auto-delete, internal, alternate-exchange); nothing binds to or from the
default exchange; a binding is identified by all five of source,
destination kind, destination, key and arguments; deleting a queue or an
exchange deletes its bindings, and an auto-delete exchange goes when its
last binding as a source goes, which may cascade. Anything the state
accepts, the table accepts (the property tests hold them to it).

Every handler is `(state, command) -> (state, result, effects)` and raises
`Refused` for an error result; machine.py turns that into `Error`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

from metadata import commands as c
from metadata import effects as fx
from metadata.effects import CREATED, OK, Effect, Result
from metadata.feature_flags import (
    CONSISTENT_HASH_EXCHANGE,
    DELAYED_MESSAGE_EXCHANGE,
    QUEUE_DECLARING_USER,
    QUORUM_QUEUE_V1,
    STREAM_QUEUE,
    STREAM_REPLICATION,
)
from metadata.pmap import EMPTY
from metadata.state import BindingRecord, ExchangeRecord, MetadataState, QueueRecord, StreamRecord, VHostState
from queues.base import QueueArgumentError
from queues.classic import ClassicQueueConfig
from queues.equivalence import first_difference, inequivalent
from queues.stream.config import StreamConfig
from routing.delayed import underlying_type
from routing.errors import RoutingError
from routing.exchange_types import check_exchange_arguments, new_index
from routing.model import ALTERNATE_EXCHANGE, DEFAULT_EXCHANGE, Binding, DestinationKind, ExchangeType
from routing.table import MAX_NAME_BYTES, RESERVED_PREFIX

__all__ = ["Outcome", "Refused", "bind", "declare_exchange", "declare_queue", "delete_exchange", "delete_queue",
           "unbind", "vhost_of"]  # fmt: skip

Outcome = tuple[MetadataState, Result, tuple[Effect, ...]]

QUEUE = DestinationKind.QUEUE.value
EXCHANGE = DestinationKind.EXCHANGE.value
QUEUE_TYPES = ("classic", "quorum", "stream")


class Refused(Exception):
    """An error result, raised inside apply and caught before it returns."""

    def __init__(self, condition: str, description: str):
        super().__init__(description)
        self.condition = condition
        self.description = description


def vhost_of(state: MetadataState, name: str) -> VHostState:
    vh = state.vhosts.get(name)
    if vh is None:
        raise Refused(fx.NOT_FOUND, f"no vhost '{name}'")
    return vh


def arguments_of(data: bytes, what: str) -> dict[str, Any]:
    try:
        return c.unpack(data)
    except ValueError as e:
        raise Refused(fx.INVALID_FIELD, f"{what}: {e}") from None


def frozen_map(arguments: dict[str, Any]) -> MappingProxyType:
    return MappingProxyType(arguments)


def _reserved(name: str) -> bool:
    return name == DEFAULT_EXCHANGE or name.startswith(RESERVED_PREFIX)


def _check_name(name: str, what: str) -> None:
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise Refused(fx.INVALID_FIELD, f"{what} name longer than {MAX_NAME_BYTES} bytes")


# -- exchanges -------------------------------------------------------------------


def declare_exchange(state: MetadataState, cmd: c.DeclareExchange) -> Outcome:
    vh = vhost_of(state, cmd.vhost)
    arguments = arguments_of(cmd.arguments, f"arguments of exchange '{cmd.name}'")
    try:
        exchange_type = ExchangeType(cmd.type)
    except ValueError:
        raise Refused(fx.INVALID_FIELD, f"unknown exchange type '{cmd.type}'") from None
    if exchange_type is ExchangeType.CONSISTENT_HASH and not state.flag_enabled(CONSISTENT_HASH_EXCHANGE):
        raise Refused(fx.NOT_IMPLEMENTED, f"exchange type '{cmd.type}' needs feature flag '{CONSISTENT_HASH_EXCHANGE}'")
    if exchange_type is ExchangeType.DELAYED_MESSAGE and not state.flag_enabled(DELAYED_MESSAGE_EXCHANGE):
        raise Refused(fx.NOT_IMPLEMENTED, f"exchange type '{cmd.type}' needs feature flag '{DELAYED_MESSAGE_EXCHANGE}'")
    alternate = arguments.get(ALTERNATE_EXCHANGE)
    if alternate is not None and not isinstance(alternate, str):
        raise Refused(fx.INVALID_FIELD, f"invalid {ALTERNATE_EXCHANGE} argument {alternate!r}")
    try:
        check_exchange_arguments(exchange_type, arguments)
    except RoutingError as e:
        raise Refused(e.condition, e.description or str(e)) from None
    if cmd.name == DEFAULT_EXCHANGE:
        raise Refused(fx.NOT_ALLOWED, "operation not permitted on the default exchange")
    current = vh.exchanges.get(cmd.name)
    if current is not None:
        _check_equivalent(current, exchange_type.value, cmd, alternate)
        return state, OK, ()
    if _reserved(cmd.name):
        raise Refused(fx.NOT_ALLOWED, f"exchange name '{cmd.name}' contains reserved prefix '{RESERVED_PREFIX}*'")
    _check_name(cmd.name, "exchange")
    record = ExchangeRecord(cmd.vhost, cmd.name, exchange_type.value, cmd.durable, cmd.auto_delete, cmd.internal,
                            cmd.arguments)  # fmt: skip
    effect = fx.ExchangeDeclared(cmd.vhost, cmd.name, record.type, cmd.durable, cmd.auto_delete, cmd.internal,
                                 frozen_map(arguments))  # fmt: skip
    return state.with_vhost(vh.replace(exchanges=vh.exchanges.set(cmd.name, record))), CREATED, (effect,)


def _check_equivalent(current: ExchangeRecord, type: str, cmd: c.DeclareExchange, alternate: Any) -> None:
    current_alternate = current.arguments_map.get(ALTERNATE_EXCHANGE)
    if not isinstance(current_alternate, str):
        current_alternate = None
    for field, have, want in (
        ("type", current.type, type),
        ("durable", current.durable, cmd.durable),
        ("auto_delete", current.auto_delete, cmd.auto_delete),
        ("internal", current.internal, cmd.internal),
        (ALTERNATE_EXCHANGE, current_alternate, alternate),
    ):
        if have != want:
            raise Refused(
                fx.PRECONDITION_FAILED,
                f"inequivalent arg '{field}' for exchange '{current.name}' in vhost '{current.vhost}': "
                f"received {want!r} but current is {have!r}",
            )


def delete_exchange(state: MetadataState, cmd: c.DeleteExchange) -> Outcome:
    vh = vhost_of(state, cmd.vhost)
    if _reserved(cmd.name):
        raise Refused(fx.NOT_ALLOWED, f"deletion of system exchange '{cmd.name}' not allowed")
    if cmd.name not in vh.exchanges:
        raise Refused(fx.NOT_FOUND, f"no exchange '{cmd.name}' in vhost '{cmd.vhost}'")
    if cmd.if_unused and cmd.name in vh.bindings:
        raise Refused(fx.PRECONDITION_FAILED, f"exchange '{cmd.name}' in vhost '{cmd.vhost}' in use")
    effects: list[Effect] = [fx.ExchangeDeleted(cmd.vhost, cmd.name)]
    outgoing = [b for slot in vh.bindings.get(cmd.name, EMPTY).values() for b in slot]
    incoming = [b for b in vh.bindings_to(EXCHANGE, cmd.name) if b.source != cmd.name]  # a self-binding is outgoing
    vh = vh.replace(exchanges=vh.exchanges.discard(cmd.name))
    vh = _remove_bindings(vh, outgoing + incoming, effects)
    return state.with_vhost(vh), OK, tuple(effects)


# -- queues ------------------------------------------------------------------------


def declare_queue(state: MetadataState, cmd: c.DeclareQueue) -> Outcome:
    if isinstance(cmd, c.DeclareQueueByUser) and not state.flag_enabled(QUEUE_DECLARING_USER):
        raise Refused(fx.PRECONDITION_FAILED, f"a queue's declaring user needs the feature flag {QUEUE_DECLARING_USER}")
    vh = vhost_of(state, cmd.vhost)
    if not cmd.name:
        raise Refused(fx.INVALID_FIELD, "empty queue name (the proposer names server-named queues)")
    _check_name(cmd.name, "queue")
    arguments = arguments_of(cmd.arguments, f"arguments of queue '{cmd.name}'")
    declared_type = arguments.get("x-queue-type")
    if declared_type is not None and declared_type != cmd.type:
        raise Refused(fx.INVALID_FIELD, f"x-queue-type {declared_type!r} contradicts queue type '{cmd.type}'")
    current = vh.queues.get(cmd.name)
    if current is not None:
        difference = first_difference((
            ("x-queue-type", current.type, cmd.type),
            ("durable", current.durable, cmd.durable),
            ("auto_delete", current.auto_delete, cmd.auto_delete),
            ("exclusive", current.exclusive_owner is not None, cmd.exclusive_owner is not None),
        ), current.arguments_map, arguments)  # fmt: skip
        if difference is not None:
            raise Refused(fx.PRECONDITION_FAILED, inequivalent("queue", cmd.name, cmd.vhost, difference))
        if current.exclusive_owner is not None and current.exclusive_owner != cmd.exclusive_owner:
            raise Refused(fx.RESOURCE_LOCKED, f"cannot obtain exclusive access to locked queue '{cmd.name}' "
                                              f"in vhost '{cmd.vhost}'")  # fmt: skip
        return state, OK, ()
    _check_type(state, cmd.type, arguments)
    _check_placement(state, cmd)
    _check_queue_limit(state, cmd.vhost, cmd.name, len(vh.queues))
    replicas = cmd.replicas
    streams = vh.streams
    if cmd.type == "stream" and state.flag_enabled(STREAM_REPLICATION):
        replicas = replicas or (cmd.leader,)
        if cmd.leader not in replicas:
            raise Refused(fx.INVALID_FIELD, f"stream '{cmd.name}': its leader is not among its replicas")
        streams = streams.set(cmd.name, StreamRecord(cmd.vhost, cmd.name, cmd.leader, replicas, 1))
    user = cmd.user if isinstance(cmd, c.DeclareQueueByUser) else ""
    record = QueueRecord(cmd.vhost, cmd.name, cmd.type, cmd.durable, cmd.auto_delete, cmd.exclusive_owner,
                         cmd.arguments, cmd.leader, replicas, user)  # fmt: skip
    effect = fx.QueueDeclared(cmd.vhost, cmd.name, cmd.type, cmd.durable, cmd.auto_delete, cmd.exclusive_owner,
                              frozen_map(arguments), cmd.leader, replicas)  # fmt: skip
    vh = vh.replace(queues=vh.queues.set(cmd.name, record), streams=streams)
    return state.with_vhost(vh), CREATED, (effect,)


def _check_queue_limit(state: MetadataState, vhost: str, name: str, queues: int) -> None:
    """The vhost limit max-queues (negative: none), checked here so that every
    member counts the same queues."""
    record = state.limits.get(("vhost", vhost, "max-queues"))
    if record is not None and 0 <= record.value <= queues:
        raise Refused(fx.RESOURCE_LIMIT_EXCEEDED,
                      f"cannot declare queue '{name}': queue limit in vhost '{vhost}' ({record.value}) is reached")  # fmt: skip


def _check_type(state: MetadataState, queue_type: str, arguments: dict[str, Any]) -> None:
    if queue_type not in QUEUE_TYPES:
        raise Refused(fx.INVALID_FIELD, f"unknown queue type '{queue_type}'")
    if queue_type == "classic":
        try:
            ClassicQueueConfig.from_arguments(arguments)
        except QueueArgumentError as e:
            raise Refused(fx.INVALID_FIELD, str(e)) from None
    elif queue_type == "quorum" and not state.flag_enabled(QUORUM_QUEUE_V1):
        # The flag, not the code on this member, decides: every member must
        # give the same answer, whatever version it runs.
        raise Refused(fx.NOT_IMPLEMENTED, f"queue type 'quorum' needs feature flag '{QUORUM_QUEUE_V1}'")
    elif queue_type == "stream":
        if not state.flag_enabled(STREAM_QUEUE):
            raise Refused(fx.NOT_IMPLEMENTED, f"queue type 'stream' needs feature flag '{STREAM_QUEUE}'")
        try:
            StreamConfig.from_arguments(arguments)
        except QueueArgumentError as e:
            raise Refused(fx.INVALID_FIELD, str(e)) from None


def _check_placement(state: MetadataState, cmd: c.DeclareQueue) -> None:
    for node in (cmd.leader, *cmd.replicas):
        if node not in state.members:
            raise Refused(fx.INVALID_FIELD, f"queue '{cmd.name}' placed on '{node}', which is not a cluster member")
    if len(set(cmd.replicas)) != len(cmd.replicas):
        raise Refused(fx.INVALID_FIELD, f"queue '{cmd.name}' lists a replica twice")


def delete_queue(state: MetadataState, cmd: c.DeleteQueue) -> Outcome:
    vh = vhost_of(state, cmd.vhost)
    queue = vh.queues.get(cmd.name)
    if queue is None:
        raise Refused(fx.NOT_FOUND, f"no queue '{cmd.name}' in vhost '{cmd.vhost}'")
    effects: list[Effect] = [queue_deleted(queue)]
    vh = vh.replace(queues=vh.queues.discard(cmd.name), streams=vh.streams.discard(cmd.name))
    vh = _remove_bindings(vh, vh.bindings_to(QUEUE, cmd.name), effects)
    return state.with_vhost(vh), OK, tuple(effects)


def set_queue_replicas(state: MetadataState, cmd: c.SetQueueReplicas) -> Outcome:
    vh = vhost_of(state, cmd.vhost)
    queue = vh.queues.get(cmd.name)
    if queue is None:
        raise Refused(fx.NOT_FOUND, f"no queue '{cmd.name}' in vhost '{cmd.vhost}'")
    if queue.type != "quorum":
        raise Refused(fx.PRECONDITION_FAILED, f"queue '{cmd.name}' is not replicated (type '{queue.type}')")
    if not cmd.replicas or len(set(cmd.replicas)) != len(cmd.replicas):
        raise Refused(fx.INVALID_FIELD, f"queue '{cmd.name}' needs distinct replicas, at least one")
    for node in cmd.replicas:
        if node not in state.members:
            raise Refused(fx.INVALID_FIELD, f"queue '{cmd.name}' placed on '{node}', which is not a cluster member")
    if tuple(cmd.replicas) == queue.replicas:
        return state, OK, ()
    leader = queue.leader if queue.leader in cmd.replicas else cmd.replicas[0]
    record = dataclasses.replace(queue, replicas=tuple(cmd.replicas), leader=leader)
    effect = fx.QueueReplicasChanged(cmd.vhost, cmd.name, queue.type, leader, tuple(cmd.replicas), queue.replicas)
    return state.with_vhost(vh.replace(queues=vh.queues.set(cmd.name, record))), OK, (effect,)


def stream_elect(state: MetadataState, cmd: c.StreamElect) -> Outcome:
    """Fencing: only a proposer that saw the current epoch moves the stream
    on, so of two replicas electing themselves at once one is refused."""
    vh = vhost_of(state, cmd.vhost)
    stream = vh.streams.get(cmd.name)
    if stream is None:
        raise Refused(fx.NOT_FOUND, f"no replicated stream '{cmd.name}' in vhost '{cmd.vhost}'")
    if cmd.epoch != stream.epoch:
        raise Refused(fx.PRECONDITION_FAILED,
                      f"stream '{cmd.name}' is at epoch {stream.epoch}, not {cmd.epoch}")  # fmt: skip
    replicas = tuple(cmd.replicas) or stream.replicas
    if len(set(replicas)) != len(replicas):
        raise Refused(fx.INVALID_FIELD, f"stream '{cmd.name}' lists a replica twice")
    if cmd.leader not in replicas:
        raise Refused(fx.INVALID_FIELD, f"stream '{cmd.name}': leader '{cmd.leader}' is not among its replicas")
    for node in replicas:
        if node not in state.members:
            raise Refused(fx.INVALID_FIELD, f"stream '{cmd.name}' placed on '{node}', which is not a cluster member")
    queue = vh.queues[cmd.name]
    record = StreamRecord(cmd.vhost, cmd.name, cmd.leader, replicas, stream.epoch + 1)
    vh = vh.replace(streams=vh.streams.set(cmd.name, record),
                    queues=vh.queues.set(cmd.name, dataclasses.replace(queue, leader=cmd.leader, replicas=replicas)))
    effect = fx.QueueReplicasChanged(cmd.vhost, cmd.name, "stream", cmd.leader, replicas, stream.replicas)
    return state.with_vhost(vh), OK, (effect,)


def queue_deleted(queue: QueueRecord) -> fx.QueueDeleted:
    return fx.QueueDeleted(queue.vhost, queue.name, queue.type, queue.leader, queue.replicas)


# -- bindings ----------------------------------------------------------------------

_VALIDATORS = {t: new_index(t, lambda pool: pool[0]) for t in ExchangeType if t is not ExchangeType.DELAYED_MESSAGE}


def _validator(source: ExchangeRecord) -> Any:
    """What checks a binding of `source`: a delayed exchange's bindings are its x-delayed-type's."""
    exchange_type = ExchangeType(source.type)
    if exchange_type is ExchangeType.DELAYED_MESSAGE:
        exchange_type = underlying_type(source.arguments_map)
    return _VALIDATORS[exchange_type]


def _binding_checks(vh: VHostState, cmd: c.Bind | c.Unbind) -> tuple[ExchangeRecord, dict[str, Any]]:
    """The table's checks, in its order: kind, default exchange, source,
    destination. Returns the source exchange and the decoded arguments."""
    if cmd.destination_kind not in (QUEUE, EXCHANGE):
        raise Refused(fx.INVALID_FIELD, f"invalid destination kind {cmd.destination_kind!r}")
    if cmd.source == DEFAULT_EXCHANGE or (cmd.destination_kind == EXCHANGE and cmd.destination == DEFAULT_EXCHANGE):
        raise Refused(fx.NOT_ALLOWED, "operation not permitted on the default exchange")
    arguments = arguments_of(cmd.arguments, "binding arguments")
    source = vh.exchanges.get(cmd.source)
    if source is None:
        raise Refused(fx.NOT_FOUND, f"no exchange '{cmd.source}' in vhost '{vh.name}'")
    present = vh.queues if cmd.destination_kind == QUEUE else vh.exchanges
    if cmd.destination not in present:
        raise Refused(fx.NOT_FOUND, f"no {cmd.destination_kind} '{cmd.destination}' in vhost '{vh.name}'")
    return source, arguments


def _find(vh: VHostState, cmd: c.Bind | c.Unbind, arguments: dict[str, Any]) -> BindingRecord | None:
    variants = vh.bindings.get(cmd.source, EMPTY).get((cmd.destination_kind, cmd.destination, cmd.binding_key), ())
    for b in variants:
        if b.arguments == cmd.arguments or b.arguments_map == arguments:
            return b
    return None


def bind(state: MetadataState, cmd: c.Bind) -> Outcome:
    vh = vhost_of(state, cmd.vhost)
    source, arguments = _binding_checks(vh, cmd)
    try:
        _validator(source).validate(
            Binding(cmd.source, cmd.destination_kind, cmd.destination, cmd.binding_key, arguments)
        )
    except RoutingError as e:
        raise Refused(e.condition, e.description or str(e)) from None
    if _find(vh, cmd, arguments) is not None:
        return state, OK, ()
    b = BindingRecord(cmd.vhost, cmd.source, cmd.destination_kind, cmd.destination, cmd.binding_key, cmd.arguments)
    effect = fx.BindingAdded(cmd.vhost, cmd.source, cmd.destination_kind, cmd.destination, cmd.binding_key,
                             frozen_map(arguments))  # fmt: skip
    return state.with_vhost(_link(vh, b)), CREATED, (effect,)


def unbind(state: MetadataState, cmd: c.Unbind) -> Outcome:
    """Unbinding what is not bound is not an error (RabbitMQ's unbind is
    idempotent); a missing source or destination is."""
    vh = vhost_of(state, cmd.vhost)
    _, arguments = _binding_checks(vh, cmd)
    b = _find(vh, cmd, arguments)
    if b is None:
        return state, OK, ()
    effects: list[Effect] = []
    vh = _remove_bindings(vh, [b], effects)
    return state.with_vhost(vh), OK, tuple(effects)


def binding_effect(cls: type, b: BindingRecord) -> Any:
    return cls(b.vhost, b.source, b.destination_kind, b.destination, b.binding_key, frozen_map(b.arguments_map))


def _link(vh: VHostState, b: BindingRecord) -> VHostState:
    slot = (b.destination_kind, b.destination, b.binding_key)
    target = (b.destination_kind, b.destination)
    slots = vh.bindings.get(b.source, EMPTY)
    slots = slots.set(slot, slots.get(slot, ()) + (b,))
    sources = vh.incoming.get(target, EMPTY).set((b.source, b.binding_key), None)
    return vh.replace(bindings=vh.bindings.set(b.source, slots), incoming=vh.incoming.set(target, sources))


def _unlink(vh: VHostState, b: BindingRecord) -> VHostState:
    slot = (b.destination_kind, b.destination, b.binding_key)
    slots = vh.bindings[b.source]
    variants = tuple(x for x in slots[slot] if x != b)
    incoming = vh.incoming
    if variants:
        slots = slots.set(slot, variants)
    else:
        slots = slots.discard(slot)
        target = (b.destination_kind, b.destination)
        sources = incoming[target].discard((b.source, b.binding_key))
        incoming = incoming.set(target, sources) if sources else incoming.discard(target)
    bindings = vh.bindings.set(b.source, slots) if slots else vh.bindings.discard(b.source)
    return vh.replace(bindings=bindings, incoming=incoming)


def _remove_bindings(vh: VHostState, bindings: Sequence[BindingRecord], effects: list[Effect]) -> VHostState:
    """Unlink stored bindings, then auto-delete the sources left without any
    binding (which unlinks more bindings, and so on): RoutingTable's rule."""
    pending = [b.source for b in bindings]
    for b in bindings:
        vh = _unlink(vh, b)
        effects.append(binding_effect(fx.BindingRemoved, b))
    while pending:
        name = pending.pop()
        exchange = vh.exchanges.get(name)
        if exchange is None or not exchange.auto_delete or name in vh.bindings:
            continue
        vh = vh.replace(exchanges=vh.exchanges.discard(name))
        effects.append(fx.ExchangeDeleted(vh.name, name))
        for b in vh.bindings_to(EXCHANGE, name):
            vh = _unlink(vh, b)
            effects.append(binding_effect(fx.BindingRemoved, b))
            pending.append(b.source)
    return vh
