"""The metadata machine's snapshot: the whole state as one AMQP value.

    ["warren.metadata", SNAPSHOT_FORMAT, machine_version, recent_limit,
     vhosts, users, permissions, members, feature_flags,
     recent_previous, recent (, limits (, topic_permissions (, global_parameters (, parameters))))]

    vhosts       [[vhost record, [exchange], [queue], [binding], [policy] (, [operator policy]
                 (, [stream]))], ...]
                 (the operator policies only when there are any or streams follow, the
                 replicated streams only when there are any, so a snapshot without them
                 reads the same as before they existed)
    a record     [format, field, field, ...]   (its dataclass fields in order, format first)
    recent       [[key, digest, result], ...]  result: ["ok"] | ["created"] | ["error", condition, description]
    limits       [limit record, ...], topic_permissions [topic permission
                 record, ...], global_parameters [record, ...] and parameters [record, ...]: each written only when it or a later element has
                 something, so a state without them gives the bytes it gave before
                 they existed, and snapshots from before them restore with none

Deterministic: maps are written in their iteration order, which depends only
on the commands applied (metadata/pmap.py), and restoring rebuilds them in
that order, so equal states give byte-identical snapshots, before and after
a restore.

Versioned twice: SNAPSHOT_FORMAT for this layout, and each record's `format`
for its own fields. A record read in an older format is migrated by the
functions registered in MIGRATIONS (a vhost record's format 1 lacks its
default queue type, format 2 its protection from deletion); a record is written in the oldest format that holds it
(DOWNGRADES), so builds before a new field read a state that does not use it.
A newer format, snapshot layout or machine version than this build knows is
refused (SnapshotFormatError), never guessed at.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from typing import Any

from amqp import codec
from metadata.effects import CREATED, OK, Error, Result
from metadata.pmap import PMap
from metadata.state import (
    MACHINE_VERSION,
    BindingRecord,
    ExchangeRecord,
    GlobalParameterRecord,
    LimitRecord,
    MemberRecord,
    MetadataState,
    ParameterRecord,
    PermissionRecord,
    PolicyRecord,
    QueueRecord,
    Recent,
    StreamRecord,
    TopicPermissionRecord,
    UserRecord,
    VHostRecord,
    VHostState,
)

__all__ = ["DOWNGRADES", "MIGRATIONS", "SNAPSHOT_FORMAT", "SnapshotFormatError", "decode_state", "encode_state"]

MAGIC = "warren.metadata"
SNAPSHOT_FORMAT = 1

# (record class, format) -> function turning that format's field list (format
# excluded) into the next format's.
MIGRATIONS: dict[tuple[type, int], Callable[[list[Any]], list[Any]]] = {
    (VHostRecord, 1): lambda fields: [*fields, ""],  # format 2 added default_queue_type
    (VHostRecord, 2): lambda fields: [*fields, False],  # format 3 added protected_from_deletion
    (QueueRecord, 1): lambda fields: [*fields, ""],  # format 2 added the declaring user
}

# record class -> the steps down, newest first: (older format, its fields from
# the next newer format's, or None when the record uses what that format
# lacks). A record is written in the oldest format that holds it, so the
# snapshot of a state that uses nothing new reads on the builds before it: a
# mixed-version cluster whose new feature flag is still off installs it on
# every member.
DOWNGRADES: dict[type, tuple[tuple[int, Callable[[list[Any]], list[Any] | None]], ...]] = {
    VHostRecord: (
        (2, lambda fields: None if fields[4] else fields[:4]),  # not protected_from_deletion
        (1, lambda fields: None if fields[3] else fields[:3]),  # no default_queue_type
    ),
    QueueRecord: ((1, lambda fields: None if fields[9] else fields[:9]),),  # no declaring user
}


class SnapshotFormatError(ValueError):
    """Bytes that are not a metadata snapshot this build can read."""


# -- records ---------------------------------------------------------------------


def _layout(cls: type) -> tuple[int, tuple[str, ...], tuple[int, ...]]:
    """(current format, field names but format, positions of tuple fields)."""
    fields = dataclasses.fields(cls)
    assert fields[-1].name == "format"
    hints = typing.get_type_hints(cls)
    tuples = tuple(i for i, f in enumerate(fields) if typing.get_origin(hints[f.name]) is tuple)
    return fields[-1].default, tuple(f.name for f in fields[:-1]), tuples


_LAYOUTS = {cls: _layout(cls) for cls in (VHostRecord, UserRecord, PermissionRecord, ExchangeRecord, QueueRecord,
                                          BindingRecord, PolicyRecord, MemberRecord, LimitRecord,
                                          TopicPermissionRecord, StreamRecord, GlobalParameterRecord,
                                          ParameterRecord)}  # fmt: skip


def _record(rec: Any) -> list[Any]:
    _, names, _ = _LAYOUTS[type(rec)]
    fmt, fields = rec.format, [getattr(rec, n) for n in names]
    for older_format, downgrade in DOWNGRADES.get(type(rec), ()):
        older = downgrade(fields)
        if older is None:
            break
        fmt, fields = older_format, older
    return [fmt, *fields]


def _unrecord(cls: type, value: Any) -> Any:
    current, names, tuples = _LAYOUTS[cls]
    if not isinstance(value, list) or not value or not isinstance(value[0], int):
        raise SnapshotFormatError(f"{cls.__name__}: not a record")
    fmt, fields = int(value[0]), value[1:]
    if fmt > current:
        raise SnapshotFormatError(f"{cls.__name__} format {fmt} is newer than this build's {current}")
    while fmt < current:
        migrate = MIGRATIONS.get((cls, fmt))
        if migrate is None:
            raise SnapshotFormatError(f"no migration for {cls.__name__} format {fmt}")
        fields, fmt = migrate(fields), fmt + 1
    if len(fields) != len(names):
        raise SnapshotFormatError(f"{cls.__name__}: {len(fields)} fields, expected {len(names)}")
    for i in tuples:
        fields[i] = tuple(fields[i])
    return cls(*fields, fmt)


# -- results -----------------------------------------------------------------------


def _result(result: Result) -> list[Any]:
    if isinstance(result, Error):
        return ["error", result.condition, result.description]
    return ["created"] if result == CREATED else ["ok"]


def _unresult(value: list[Any]) -> Result:
    if value == ["ok"]:
        return OK
    if value == ["created"]:
        return CREATED
    if len(value) == 3 and value[0] == "error":
        return Error(str(value[1]), str(value[2]))
    raise SnapshotFormatError(f"not a result: {value!r:.60}")


# -- the state ---------------------------------------------------------------------


def encode_state(state: MetadataState) -> bytes:
    vhosts = [
        [
            _record(vh.record),
            [_record(x) for x in vh.exchanges.values()],
            [_record(q) for q in vh.queues.values()],
            [_record(b) for b in vh.all_bindings()],
            [_record(p) for p in vh.policies.values()],
            *([[_record(p) for p in vh.operator_policies.values()]] if vh.operator_policies or vh.streams else []),
            *([[_record(x) for x in vh.streams.values()]] if vh.streams else []),
        ]
        for vh in state.vhosts.values()
    ]
    value = [
        MAGIC, SNAPSHOT_FORMAT, state.machine_version, state.recent_limit,
        vhosts,
        [_record(u) for u in state.users.values()],
        [_record(p) for p in state.permissions.values()],
        [_record(m) for m in state.members.values()],
        list(state.feature_flags),
        [[k, r.digest, _result(r.result)] for k, r in state.recent_previous.items()],
        [[k, r.digest, _result(r.result)] for k, r in state.recent.items()],
    ]  # fmt: skip
    optional = [[_record(x) for x in state.limits.values()],
                [_record(t) for t in state.topic_permissions.values()],
                [_record(g) for g in state.global_parameters.values()],
                [_record(p) for p in state.parameters.values()]]  # fmt: skip
    while optional and not optional[-1]:
        optional.pop()
    value.extend(optional)
    return codec.dumps(value)


def decode_state(data: bytes) -> MetadataState:
    try:
        value = codec.loads(data)
    except Exception as e:  # codec.DecodeError and friends
        raise SnapshotFormatError(f"not an AMQP value: {e}") from None
    if not isinstance(value, list) or len(value) < 4 or value[0] != MAGIC:
        raise SnapshotFormatError("not a Warren metadata snapshot")
    if value[1] != SNAPSHOT_FORMAT:
        raise SnapshotFormatError(f"snapshot format {value[1]!r}; this build reads {SNAPSHOT_FORMAT}")
    if not isinstance(value[2], int) or value[2] > MACHINE_VERSION:
        raise SnapshotFormatError(f"machine version {value[2]!r} is newer than this build's {MACHINE_VERSION}")
    try:
        return _decode(value)
    except SnapshotFormatError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
        raise SnapshotFormatError(f"malformed metadata snapshot: {type(e).__name__}: {e}") from None


def _decode(value: list[Any]) -> MetadataState:
    (_, _, machine_version, recent_limit, vhosts, users, permissions, members, flags, previous, recent, *rest) = value
    if len(rest) > 4:
        raise SnapshotFormatError(f"a snapshot of {len(value)} elements")
    limits = rest[0] if rest else []
    topic = [_unrecord(TopicPermissionRecord, v) for v in (rest[1] if len(rest) > 1 else [])]
    global_parameters = [_unrecord(GlobalParameterRecord, v) for v in (rest[2] if len(rest) > 2 else [])]
    parameters = [_unrecord(ParameterRecord, v) for v in (rest[3] if len(rest) > 3 else [])]
    return MetadataState(
        vhosts=PMap((vh.name, vh) for vh in map(_decode_vhost, vhosts)),
        users=PMap((u.name, u) for u in (_unrecord(UserRecord, v) for v in users)),
        permissions=PMap(((p.user, p.vhost), p) for p in (_unrecord(PermissionRecord, v) for v in permissions)),
        topic_permissions=PMap(((t.user, t.vhost, t.exchange), t) for t in topic),
        members=PMap((m.node, m) for m in (_unrecord(MemberRecord, v) for v in members)),
        feature_flags=tuple(str(f) for f in flags),
        recent=PMap((str(k), Recent(bytes(d), _unresult(r))) for k, d, r in recent),
        recent_previous=PMap((str(k), Recent(bytes(d), _unresult(r))) for k, d, r in previous),
        recent_limit=int(recent_limit),
        machine_version=int(machine_version),
        limits=PMap(((x.scope, x.name, x.limit), x) for x in (_unrecord(LimitRecord, v) for v in limits)),
        global_parameters=PMap((g.name, g) for g in global_parameters),
        parameters=PMap(((p.vhost, p.component, p.name), p) for p in parameters),
    )


def _decode_vhost(value: list[Any]) -> VHostState:
    record, exchanges, queues, bindings, policies, *rest = value
    if len(rest) > 2:
        raise SnapshotFormatError(f"a vhost entry of {len(value)} elements")
    operator_policies = rest[0] if rest else []
    streams = rest[1] if len(rest) > 1 else []
    vh = _unrecord(VHostRecord, record)
    slots: dict[str, dict[tuple[str, str, str], list[BindingRecord]]] = {}
    incoming: dict[tuple[str, str], dict[tuple[str, str], None]] = {}
    for b in (_unrecord(BindingRecord, v) for v in bindings):
        slots.setdefault(b.source, {}).setdefault((b.destination_kind, b.destination, b.binding_key), []).append(b)
        incoming.setdefault((b.destination_kind, b.destination), {})[(b.source, b.binding_key)] = None
    return VHostState(
        vh,
        exchanges=PMap((x.name, x) for x in (_unrecord(ExchangeRecord, v) for v in exchanges)),
        queues=PMap((q.name, q) for q in (_unrecord(QueueRecord, v) for v in queues)),
        bindings=PMap((s, PMap((k, tuple(v)) for k, v in by_slot.items())) for s, by_slot in slots.items()),
        incoming=PMap((t, PMap(sources)) for t, sources in incoming.items()),
        policies=PMap((p.name, p) for p in (_unrecord(PolicyRecord, v) for v in policies)),
        operator_policies=PMap((p.name, p) for p in (_unrecord(PolicyRecord, v) for v in operator_policies)),
        streams=PMap((x.name, x) for x in (_unrecord(StreamRecord, v) for v in streams)),
    )
