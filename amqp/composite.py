"""Composite types [1.3.1]: described lists with typed, named fields.

A composite class is declared as a table of fields; `composite()` builds a
slotted class with an __init__ taking the fields as keywords, encoding into
the narrowest form (trailing null fields trimmed, defaults sent as null) and
registered with the codec so that decoding returns an instance. Decoding
validates each field's type and presence: a peer that breaks the type rules
gets `amqp:decode-error`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from . import codec, structs
from .errors import DecodeError
from .types import Array, Symbol, Timestamp, UByte, UInt, ULong, UShort

# the table's layouts, assigned and not imported (amqp/structs.py says why)
_u64 = structs.U64
_u32u32 = structs.SIZE_COUNT32


class Field(NamedTuple):
    name: str
    type: str  # uint, ushort, ubyte, ulong, bool, string, symbol, binary, fields, map, timestamp, *
    mandatory: bool = False
    default: Any = None
    multiple: bool = False


def _encode_symbol_keyed_map(buf: bytearray, v: dict) -> None:
    # fields and annotations are keyed by symbols [2.8.14], [3.2.10]
    codec.encode_map(buf, {Symbol(k) if type(k) is str else k: x for k, x in v.items()})


def _encode_symbols(buf: bytearray, v: Any) -> None:
    if isinstance(v, str):
        v = [v]
    # an empty array still names its symbol constructor
    codec.encode_array(buf, Array([Symbol(s) for s in v], code=None if v else 0xA3))


_FIELD_ENCODERS: dict[str, Callable[[bytearray, Any], None]] = {
    "uint": codec.encode_uint,
    "ushort": codec.encode_ushort,
    "ubyte": codec.encode_ubyte,
    "ulong": codec.encode_ulong,
    "bool": codec.encode_bool,
    "string": codec.encode_string,
    "symbol": codec.encode_symbol,
    "binary": codec.encode_binary,
    "fields": _encode_symbol_keyed_map,
    "map": _encode_symbol_keyed_map,
    "timestamp": codec.encode_timestamp,
    "*": codec.encode,
}


def _type_check(cls: type, what: str):
    # Exact types: the decoder yields UInt for a uint, Symbol for a symbol...;
    # a long in a uint field, a string in a symbol field or a decimal (a bytes
    # subclass) in a binary field is a peer breaking the type rules.
    def check(v):
        if type(v) is not cls:
            raise DecodeError(f"expected {what}, got {type(v).__name__} {v!r}")
        return v

    return check


def _check_symbols(v):
    # a multiple field holds a single value or an array of them [1.3.1]
    if type(v) is Symbol:
        return [v]
    if not isinstance(v, Array) or any(type(s) is not Symbol for s in v):
        raise DecodeError(f"expected symbols, got {v!r}")
    return v


_FIELD_CHECKS: dict[str, Callable[[Any], Any]] = {
    "uint": _type_check(UInt, "uint"),
    "ushort": _type_check(UShort, "ushort"),
    "ubyte": _type_check(UByte, "ubyte"),
    "ulong": _type_check(ULong, "ulong"),
    "timestamp": _type_check(Timestamp, "timestamp"),
    "bool": _type_check(bool, "boolean"),
    "string": _type_check(str, "string"),  # a symbol is not a string
    "symbol": _type_check(Symbol, "symbol"),
    "binary": _type_check(bytes, "binary"),
    "fields": _type_check(dict, "map"),  # not a described map such as a message-annotations section
    "map": _type_check(dict, "map"),
    "*": lambda v: v,
}


class Composite:
    """Base of every composite type; subclasses come from `composite()`."""

    __slots__ = ()
    NAME: str = ""
    CODE: int = 0
    FIELDS: tuple[Field, ...] = ()

    def encode_into(self, buf: bytearray) -> None:
        body = bytearray()
        count = 0
        trimmed_len = 0
        for i, (f, enc) in enumerate(zip(self.FIELDS, self._ENCODERS, strict=True)):
            v = getattr(self, f.name)
            if v is None or (f.default is not None and v == f.default):
                body.append(0x40)
            else:
                enc(body, v)
                trimmed_len = len(body)
                count = i + 1
        del body[trimmed_len:]
        buf += self._PREFIX
        if count == 0:
            buf.append(0x45)
        elif len(body) + 1 < 256:
            buf += bytes((0xC0, len(body) + 1, count))
            buf += body
        else:
            buf.append(0xD0)
            buf += _u32u32.pack(len(body) + 4, count)
            buf += body

    def encode(self) -> bytes:
        buf = bytearray()
        self.encode_into(buf)
        return bytes(buf)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __repr__(self) -> str:
        shown = []
        for f in self.FIELDS:
            v = getattr(self, f.name)
            if v is not None and v != f.default:
                shown.append(f"{f.name}={v!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    __hash__ = None  # mutable


def _field_encoder(f: Field) -> Callable[[bytearray, Any], None]:
    if f.multiple and f.type == "symbol":
        return _encode_symbols
    if f.multiple:
        return codec.encode
    return _FIELD_ENCODERS[f.type]


def composite(class_name: str, name: str, code: int, fields: list[Field]) -> type[Composite]:
    """Declares a composite type and registers its descriptors for decoding."""
    names = tuple(f.name for f in fields)
    params = ", ".join(f"{n}=None" for n in names)
    assigns = "\n".join(
        f"    self.{f.name} = {f.name} if {f.name} is not None else _defaults[{i}]" for i, f in enumerate(fields)
    )
    src = f"def __init__(self, {params}):\n{assigns or '    pass'}\n"
    scope: dict[str, Any] = {"_defaults": [f.default for f in fields]}
    exec(src, scope)  # same technique as dataclasses: a real signature, no **kwargs loop
    cls = type(
        class_name,
        (Composite,),
        {
            "__slots__": names,
            "__init__": scope["__init__"],
            "NAME": name,
            "CODE": code,
            "FIELDS": tuple(fields),
            "_ENCODERS": tuple(_field_encoder(f) for f in fields),
            "_PREFIX": b"\x00\x53" + bytes((code,)) if code < 256 else b"\x00\x80" + _u64.pack(code),
        },
    )
    checks = tuple(_symbols_check if f.multiple and f.type == "symbol" else _FIELD_CHECKS[f.type] for f in fields)
    mandatory = tuple(f.mandatory for f in fields)
    defaults = [f.default for f in fields]
    n_fields = len(fields)

    def from_list(value: Any) -> Composite:
        if value is None:
            value = []
        elif type(value) is not list:  # not an array
            raise DecodeError(f"{name} must be a list, got {type(value).__name__}")
        if len(value) > n_fields:
            # [1.3.1]: a later version may add fields; extra trailing nulls are harmless
            if any(v is not None for v in value[n_fields:]):
                raise DecodeError(f"{name} has {len(value)} fields, at most {n_fields} are known")
            value = value[:n_fields]
        args = list(value) + [None] * (n_fields - len(value))
        for i, v in enumerate(args):
            if v is None:
                if mandatory[i]:
                    raise DecodeError(f"{name}: mandatory field {names[i]} is null")
                args[i] = defaults[i]
            else:
                args[i] = checks[i](v)
        return cls(*args)

    cls.from_list = staticmethod(from_list)
    codec.DESCRIBED_DECODERS[ULong(code)] = from_list
    codec.DESCRIBED_DECODERS[Symbol(name)] = from_list
    return cls


_symbols_check = _check_symbols


def restricted(class_name: str, name: str, code: int, check: Callable[[Any], Any], base: type) -> type:
    """Declares a described non-list type (message sections such as data or
    message-annotations): a subclass of `base` carrying its value."""

    prefix = b"\x00\x53" + bytes((code,))
    inner_encode: Callable[[bytearray, Any], None]
    if base is dict:
        # annotations and the footer are keyed by symbols [3.2.10], [3.2.11]
        symbol_keys = "annotations" in name or "footer" in name
        inner_encode = _encode_symbol_keyed_map if symbol_keys else codec.encode_map
    elif base is bytes:
        inner_encode = codec.encode_binary
    elif base is list:
        inner_encode = codec.encode_list
    else:
        inner_encode = codec.encode

    def encode_into(self, buf: bytearray) -> None:
        buf += prefix
        inner_encode(buf, self.value if base is object else self)

    def encode(self) -> bytes:
        buf = bytearray()
        encode_into(self, buf)
        return bytes(buf)

    attrs: dict[str, Any] = {"NAME": name, "CODE": code, "encode_into": encode_into, "encode": encode}
    if base is object:
        attrs["__slots__"] = ("value",)

        def __init__(self, value: Any = None):
            self.value = value

        attrs["__init__"] = __init__
        attrs["__eq__"] = lambda self, o: type(o) is type(self) and o.value == self.value
        attrs["__hash__"] = None
        attrs["__repr__"] = lambda self: f"{class_name}({self.value!r})"
    else:
        attrs["__repr__"] = lambda self: f"{class_name}({base.__repr__(self)})"
    cls = type(class_name, (base,), attrs)

    def from_value(value: Any) -> Any:
        return cls(check(value))

    codec.DESCRIBED_DECODERS[ULong(code)] = from_value
    codec.DESCRIBED_DECODERS[Symbol(name)] = from_value
    return cls
