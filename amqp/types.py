"""Python representations of the AMQP 1.0 primitive types [1.6].

Python's own types stand for the obvious AMQP types (None, bool, int -> long,
float -> double, str -> string, bytes -> binary, uuid.UUID, list, dict).
The subclasses below name the other AMQP types so that a value keeps its exact
type through decode and encode. They are plain subclasses: a UInt compares and
hashes like the int it holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class UByte(int):
    __slots__ = ()


class UShort(int):
    __slots__ = ()


class UInt(int):
    __slots__ = ()


class ULong(int):
    __slots__ = ()


class Byte(int):
    __slots__ = ()


class Short(int):
    __slots__ = ()


class Int(int):
    __slots__ = ()


class Long(int):
    __slots__ = ()


class Timestamp(int):
    """Milliseconds since the Unix epoch [1.6.21]."""

    __slots__ = ()


class Float(float):
    """IEEE 754 binary32 [1.6.11]; a plain float is a double."""

    __slots__ = ()


class Symbol(str):
    """An ASCII symbolic value [1.6.21]."""

    __slots__ = ()


class Char(str):
    """A single unicode code point, UTF-32BE on the wire [1.6.16]."""

    __slots__ = ()


class _Decimal(bytes):
    """IEEE 754 decimal kept as its raw big-endian bytes: the broker only
    carries decimals, it never computes with them."""

    __slots__ = ()
    size = 0

    def __new__(cls, raw: bytes):
        if len(raw) != cls.size:
            raise ValueError(f"{cls.__name__} takes {cls.size} bytes")
        return super().__new__(cls, raw)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({bytes(self)!r})"


class Decimal32(_Decimal):
    __slots__ = ()
    size = 4


class Decimal64(_Decimal):
    __slots__ = ()
    size = 8


class Decimal128(_Decimal):
    __slots__ = ()
    size = 16


class Array(list):
    """A homogeneous AMQP array [1.6.24].

    `code` is the element constructor (e.g. 0xa3 for symbols), or None to pick
    the narrowest one for the items when encoding. Arrays of described values
    carry their `descriptor`.
    """

    __slots__ = ("code", "descriptor")

    def __init__(self, items=(), code: int | None = None, descriptor: Any = None):
        super().__init__(items)
        self.code = code
        self.descriptor = descriptor

    def __repr__(self) -> str:
        return f"Array({list(self)!r}, code={self.code!r})"


@dataclass(frozen=True, slots=True)
class Described:
    """A described value whose descriptor names no known composite type."""

    descriptor: Any
    value: Any
