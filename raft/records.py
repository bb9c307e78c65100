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

A record class may instead bring its own binary layout (`command(...,
binary=codec)`), for the records that carry message bytes (a quorum queue's
publish batch): the bytes go into the entry as they are, with no AMQP
encoding around them, and a decode slices them out without parsing them.
Such an entry is

    0xff, len(kind): u8, kind (UTF-8), version: u16 big-endian, layout...

No AMQP encoding starts with 0xff (it is no format code), so both forms live
in one log and old entries stay readable. The codec is an object with
`encode(record) -> list[bytes]` (the layout's parts, joined once here) and
`decode(data, pos) -> record` (the layout starts at data[pos]). A record of
such a class compares equal to its decoded copy, so the leader applies the
object it proposed (raft/group.py, `applies_as_proposed`).

Why this replaces pysyncobj's `@replicated` methods: pysyncobj numbers the
replicated methods by sorting (version, name) and logs the number with the
pickled arguments; adding a method renumbers the others, and after a restart
from a snapshot the `ver=` dispatch falls back to version 0. Warren's groups
(raft/group.py) put `encode(record)` into the log as a plain command and
decode it when applying, so no method table is involved at all.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from amqp import codec

__all__ = [
    "BinaryCodec",
    "RecordError",
    "UnknownRecordError",
    "applies_as_proposed",
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
_BINARY = 0xFF  # first byte of a record in its class's own layout
_VERSION = struct.Struct(">H")
_binary_heads: dict[type, bytes] = {}  # class -> its entry header
_binary_codecs: dict[type, BinaryCodec] = {}


class RecordError(ValueError):
    """Bytes that are not a well-formed record, or a value a record cannot hold."""


class UnknownRecordError(RecordError):
    """A (kind, version) this node has no record class for."""


class BinaryCodec(Protocol):
    """A record class's own layout (see the module docstring)."""

    def encode(self, record: Any) -> list[bytes]: ...

    def decode(self, data: bytes, pos: int) -> Any: ...


def command(kind: str, version: int = 1, binary: BinaryCodec | None = None) -> Callable[[type[T]], type[T]]:
    """Register a frozen dataclass as the record of (kind, version), AMQP-encoded
    unless it brings its own `binary` codec."""
    if not isinstance(kind, str) or not kind:
        raise ValueError("a record kind is a non-empty string")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"a record version is an int >= 1, not {version!r}")
    kind_bytes = kind.encode()
    if binary is not None and (len(kind_bytes) > 255 or version > 0xFFFF):
        raise ValueError("a binary record's kind is at most 255 bytes and its version below 65536")

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
        if binary is not None:
            _binary_codecs[cls] = binary
            _binary_heads[cls] = bytes((_BINARY, len(kind_bytes))) + kind_bytes + _VERSION.pack(version)
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


def applies_as_proposed(record: object) -> bool:
    """The record's own layout decodes to an equal record: a member may apply
    the object it proposed instead of decoding the entry it made of it."""
    return type(record) in _binary_codecs


def encode(record: object, prefix: bytes = b"") -> bytes:
    """The record's bytes, after `prefix` (which costs no extra copy of a binary record)."""
    head = _binary_heads.get(type(record))
    if head is not None:
        try:
            return b"".join([prefix, head, *_binary_codecs[type(record)].encode(record)])
        except (TypeError, ValueError, OverflowError, struct.error) as e:
            raise RecordError(f"cannot encode {type(record).__qualname__}: {e}") from None
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
        return prefix + codec.dumps(values) if prefix else codec.dumps(values)
    except (TypeError, ValueError, OverflowError) as e:  # e.g. an int past 64 bits
        raise RecordError(f"cannot encode {kind!r}: {e}") from None


def _decode_binary(data: bytes, pos: int) -> Any:
    try:
        n = data[pos + 1]
        kind = bytes(data[pos + 2 : pos + 2 + n]).decode()
        (version,) = _VERSION.unpack_from(data, pos + 2 + n)
    except (IndexError, UnicodeDecodeError, struct.error) as e:
        raise RecordError(f"not a record: bad binary header: {e}") from None
    cls = _by_key.get((kind, version))
    if cls is None:
        raise UnknownRecordError(f"unknown record {kind!r} version {version}")
    codec_ = _binary_codecs.get(cls)
    if codec_ is None:
        raise RecordError(f"record {kind!r} version {version} has no binary layout")
    try:
        return codec_.decode(data, pos + 4 + n)
    except RecordError:
        raise
    except Exception as e:  # a truncated or malformed layout
        raise RecordError(f"malformed {kind!r} version {version}: {e!r}") from None


def decode(data: bytes, pos: int = 0) -> Any:
    """The record in data[pos:]."""
    if len(data) > pos and data[pos] == _BINARY:
        return _decode_binary(data, pos)
    if pos:
        data = data[pos:]
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
