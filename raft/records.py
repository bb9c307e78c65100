"""Replicated commands as explicit, versioned records, not pickled objects.

A command is a frozen dataclass registered under a kind and a version:

    @command("metadata.declare_queue", version=1)
    @dataclass(frozen=True)
    class DeclareQueue:
        vhost: str
        name: str
        durable: bool = True

and travels through the Raft log as the AMQP encoding (amqp/codec.py) of

    [kind, version, field_1, field_2, ...]        # fields in declaration order

so a log entry says what it is without naming a Python class, and decoding
never runs code chosen by the data (pickle would). Field values are None,
bool, int, float, str, bytes, tuples of these and dicts of these; tuples come
back as tuples (a list encodes like a tuple and decodes as one).

Versioning follows the rule of RabbitMQ's quorum-queue machine: a record's
layout never changes under the same (kind, version); a new layout is a new
version, registered beside the old one (both classes stay importable and
decodable), and the state machine accepts both. A node meeting a (kind,
version) it does not know raises UnknownRecordError instead of guessing, so
a new version may be proposed only once every member runs code that knows it.

Why this replaces pysyncobj's `@replicated` methods: pysyncobj numbers the
replicated methods by sorting (version, name) and logs the number with the
pickled arguments; adding a method renumbers the others, and after a restart
from a snapshot the `ver=` dispatch falls back to version 0. Warren's groups
(raft/group.py) put `encode(record)` into the log as a plain command and
decode it when applying, so no method table is involved at all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from amqp import codec

__all__ = [
    "RecordError",
    "UnknownRecordError",
    "command",
    "decode",
    "encode",
    "kind_of",
    "registered",
]

T = TypeVar("T")

_by_key: dict[tuple[str, int], type] = {}
_by_class: dict[type, tuple[str, int, tuple[str, ...]]] = {}
_SCALARS = (type(None), bool, int, float, str, bytes)
_PLAIN = frozenset(_SCALARS)  # decoded values of exactly these types need no conversion


class RecordError(ValueError):
    """Bytes that are not a well-formed record, or a value a record cannot hold."""


class UnknownRecordError(RecordError):
    """A (kind, version) this node has no record class for."""


def command(kind: str, version: int = 1) -> Callable[[type[T]], type[T]]:
    """Register a frozen dataclass as the record of (kind, version)."""
    if not isinstance(kind, str) or not kind:
        raise ValueError("a record kind is a non-empty string")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"a record version is an int >= 1, not {version!r}")

    def register(cls: type[T]) -> type[T]:
        if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:
            raise TypeError(f"{cls.__name__}: a record must be a frozen dataclass")
        key = (kind, version)
        if key in _by_key and _by_key[key] is not cls:
            raise ValueError(f"record {kind!r} version {version} is already {_by_key[key].__qualname__}")
        if cls in _by_class and _by_class[cls][:2] != key:
            raise ValueError(f"{cls.__qualname__} is already registered as {_by_class[cls][:2]}")
        _by_key[key] = cls
        _by_class[cls] = (kind, version, tuple(f.name for f in dataclasses.fields(cls)))
        return cls

    return register


def kind_of(record: object) -> tuple[str, int]:
    """(kind, version) of a record instance or class."""
    cls = record if isinstance(record, type) else type(record)
    try:
        kind, version, _ = _by_class[cls]
    except KeyError:
        raise RecordError(f"{cls.__qualname__} is not a registered record") from None
    return kind, version


def registered() -> dict[tuple[str, int], type]:
    """Every registered (kind, version) and its class."""
    return dict(_by_key)


def encode(record: object) -> bytes:
    try:
        kind, version, names = _by_class[type(record)]
    except KeyError:
        raise RecordError(f"{type(record).__qualname__} is not a registered record") from None
    values = [kind, version]
    for name in names:
        value = getattr(record, name)
        _check_value(value, name)
        values.append(value)
    try:
        return codec.dumps(values)
    except (TypeError, ValueError, OverflowError) as e:  # e.g. an int past 64 bits
        raise RecordError(f"cannot encode {kind!r}: {e}") from None


def decode(data: bytes) -> Any:
    try:
        value = codec.loads(data)
    except Exception as e:  # codec.DecodeError and friends
        raise RecordError(f"not a record: {e}") from None
    if not isinstance(value, list) or len(value) < 2:
        raise RecordError("not a record: expected a list [kind, version, fields...]")
    kind, version = value[0], value[1]
    if not isinstance(kind, str) or not isinstance(version, int) or isinstance(version, bool):
        raise RecordError(f"not a record: bad kind/version {kind!r}/{version!r}")
    cls = _by_key.get((kind, int(version)))
    if cls is None:
        raise UnknownRecordError(f"unknown record {kind!r} version {version}")
    names = _by_class[cls][2]
    fields = value[2:]
    if len(fields) != len(names):
        raise RecordError(f"record {kind!r} version {version} has {len(names)} fields, got {len(fields)}")
    return cls(*[v if type(v) in _PLAIN else _thaw(v) for v in fields])


def _check_value(value: Any, where: str) -> None:
    if isinstance(value, _SCALARS):
        return
    if isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            _check_value(v, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            _check_value(k, f"{where} key")
            _check_value(v, f"{where}[{k!r}]")
        return
    raise RecordError(f"field {where}: a record cannot hold {type(value).__name__}")


def _thaw(value: Any) -> Any:
    # The codec returns AMQP-typed subclasses of int (ULong, ...) and lists;
    # records hold plain ints and tuples.
    if isinstance(value, list):
        return tuple(_thaw(v) for v in value)
    if isinstance(value, dict):
        return {_thaw(k): _thaw(v) for k, v in value.items()}
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int) and type(value) is not int:
        return int(value)
    if isinstance(value, str) and type(value) is not str:
        return str(value)
    return value
