"""The broker's lazy view of an AMQP message [3.2].

A message on the wire is a run of described sections, in this order:

    header? delivery-annotations? message-annotations?
    [ properties? application-properties? body? ]   <- the bare message
    footer?

`Message.from_bytes` only finds where each section starts and ends
(sections.py): it skips each value by size without decoding it. Sections are
decoded on first access and cached.

The bare message is immutable once sent [3.2]: the broker forwards its bytes
exactly as received (they are what a signature in the footer covers), and
rewrites only the header and the annotations in front of it
(`with_header`, `with_message_annotations`, `to_delivery_bytes`).

Leniency, on purpose: a message without a body is accepted (python-qpid-proton
sends one for `Message(body=None)`), and so is an empty payload.

Decoded sections are shared with the cache: treat them as read-only.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Any

from . import codec, structs
from .definitions import (
    AmqpSequence,
    AmqpValue,
    ApplicationProperties,
    Data,
    DeliveryAnnotations,
    Footer,
    Header,
    MessageAnnotations,
    Properties,
)
from .errors import DecodeError
from .sections import (
    _ANY,
    _RANK_NAMES,
    AMQP_SEQUENCE,
    AMQP_VALUE,
    APPLICATION_PROPERTIES,
    BODY,
    DATA,
    DELIVERY_ANNOTATIONS,
    FOOTER,
    HEADER,
    MESSAGE_ANNOTATIONS,
    PROPERTIES,
    Sizes,
    _descriptor,
    _scan,
    splice,
)

__all__ = [
    "AMQP_SEQUENCE",
    "AMQP_VALUE",
    "APPLICATION_PROPERTIES",
    "BODY",
    "DATA",
    "DELIVERY_ANNOTATIONS",
    "FOOTER",
    "HEADER",
    "MESSAGE_ANNOTATIONS",
    "PROPERTIES",
    "Message",
    "Sizes",
]

_u32 = structs.U32.unpack_from

_HEADER_FIELDS = frozenset(f.name for f in Header.FIELDS)
_NO_HEADER = Header()  # the defaults a missing header stands for [3.2.1]

# ---------------------------------------------------------------- quick header and properties
#
# The router reads the header and properties of every message. The generic
# path (codec.decode, then the composite's from_list) builds an intermediate
# list and checks each field through a table; this one decodes the list's
# elements straight into the constructor's arguments. It handles only what
# it can check by constructor byte and returns None for anything else, which
# then goes to the generic path: both paths give the same section or both
# raise DecodeError (tests/amqp/test_message.py checks this).

# Constructors whose decoded value has exactly the type that composite.py
# requires of a field of each type [1.6].
_FIELD_CONSTRUCTORS = {
    "bool": frozenset((0x41, 0x42, 0x56)),
    "ubyte": frozenset((0x50,)),
    "uint": frozenset((0x43, 0x52, 0x70)),
    "ulong": frozenset((0x44, 0x53, 0x80)),
    "timestamp": frozenset((0x83,)),
    "string": frozenset((0xA1, 0xB1)),
    "symbol": frozenset((0xA3, 0xB3)),
    "binary": frozenset((0xA0, 0xB0)),
    "*": _ANY,
}


def _field_constructors(cls: type) -> tuple[frozenset[int], ...]:
    for f in cls.FIELDS:
        if f.mandatory or f.multiple:
            raise TypeError(f"the quick path cannot decode {cls.__name__}.{f.name}")
    return tuple(_FIELD_CONSTRUCTORS[f.type] for f in cls.FIELDS)


_HEADER_CONSTRUCTORS = _field_constructors(Header)
_PROPERTIES_CONSTRUCTORS = _field_constructors(Properties)


def _quick_composite(cls: type, constructors: tuple[frozenset[int], ...], data: bytes, start: int, end: int):
    """Decodes the list section at data[start:end] (scanned already), or
    returns None to leave it to the generic path."""
    p = start + 3 if data[start + 1] == 0x53 else _descriptor(data, start + 1, end)[1]
    c = data[p]
    if c == 0xC0:
        if p + 3 > end:
            return None
        count, q = data[p + 2], p + 3
    elif c == 0x45:
        return cls()
    elif c == 0xD0:
        if p + 9 > end:
            return None
        count, q = _u32(data, p + 5)[0], p + 9
    else:
        return None
    if count > len(constructors):
        return None
    args = [None] * len(constructors)
    decode_at = codec.decode_at
    for i in range(count):
        if q >= end:
            return None
        c = data[q]
        if c == 0x40:  # null: the field's default
            q += 1
        elif c in constructors[i]:
            args[i], q = decode_at(data, q, end, 2)  # depth as in the generic path
        else:
            return None
    if q != end:
        return None
    return cls(*args)


# ---------------------------------------------------------------- the message


_HEADER_CACHE_MAX = 1024
_header_cache: dict[bytes, Any] = {}  # header section bytes -> Header (shared: read-only)
_ABSENT: Any = object()
_UNSET: Any = object()
_NO_PROPERTIES = Properties()


def _header_field(name: str, doc: str) -> property:
    def get(self: Message) -> Any:
        return getattr(self.header or _NO_HEADER, name)

    return property(get, doc=f"header {name} [3.2.1]: {doc}")


def _properties_field(name: str, doc: str = "or None") -> property:
    def get(self: Message) -> Any:
        return getattr(self.properties or _NO_PROPERTIES, name)

    return property(get, doc=f"properties {name} [3.2.4], {doc}")


class Message:
    """A received message: its bytes plus the offsets of its sections.

    Section accessors decode on first use and cache; a malformed section
    raises DecodeError then, not at `from_bytes`.
    """

    # _b: section bounds (see _scan); _bc: body descriptor or 0. The other
    # slots cache decoded sections, _UNSET until first access (a sentinel
    # test is cheaper than catching AttributeError from an unset slot).
    __slots__ = ("payload", "_b", "_bc", "_h", "_da", "_ma", "_p", "_ap", "_ft", "_body")

    def __init__(self, payload: bytes, bounds: tuple[int, ...], body_code: int):
        self.payload = payload
        self._b = bounds
        self._bc = body_code
        self._h = self._da = self._ma = self._p = self._ap = self._ft = self._body = _UNSET

    @classmethod
    def from_bytes(cls, payload: bytes | bytearray | memoryview) -> Message:
        """Scans the section boundaries of an encoded message; raises
        DecodeError on malformed or out-of-order sections. A bytearray or
        memoryview is copied once into bytes, so the message is immutable."""
        if type(payload) is not bytes:
            payload = bytes(payload)
        bounds, body_code = _scan(payload)
        return cls(payload, bounds, body_code)

    @classmethod
    def build(
        cls,
        body: Any = _ABSENT,
        *,
        header: Header | Mapping[str, Any] | None = None,
        delivery_annotations: Mapping[Any, Any] | None = None,
        message_annotations: Mapping[Any, Any] | None = None,
        properties: Properties | Mapping[str, Any] | None = None,
        application_properties: Mapping[str, Any] | None = None,
        footer: Mapping[Any, Any] | None = None,
        body_kind: str | None = None,
        body_sections: Iterable[Any] | None = None,
    ) -> Message:
        """Encodes a message (for tests and management replies).

        The body is a data section for bytes and an amqp-value for anything
        else; `body_kind` forces "data" (bytes, or a list of bytes for one
        section each), "sequence" (one amqp-sequence of a list) or "value".
        `body_sections` gives the body sections themselves instead. Without
        a body argument the message has no body section.
        """
        buf = bytearray()
        if header is not None:
            (header if isinstance(header, Header) else Header(**header)).encode_into(buf)
        if delivery_annotations is not None:
            DeliveryAnnotations(delivery_annotations).encode_into(buf)
        if message_annotations is not None:
            MessageAnnotations(message_annotations).encode_into(buf)
        if properties is not None:
            (properties if isinstance(properties, Properties) else Properties(**properties)).encode_into(buf)
        if application_properties is not None:
            ApplicationProperties(application_properties).encode_into(buf)
        if body_sections is not None:
            if body is not _ABSENT:
                raise TypeError("give body or body_sections, not both")
            for section in body_sections:
                section.encode_into(buf)
        elif body is not _ABSENT:
            for section in _body_sections_for(body, body_kind):
                section.encode_into(buf)
        if footer is not None:
            Footer(footer).encode_into(buf)
        return cls.from_bytes(bytes(buf))

    # ------------------------------------------------------------ sizes, bytes

    def __len__(self) -> int:
        return len(self.payload)

    def __bytes__(self) -> bytes:
        return self.payload

    @property
    def sizes(self) -> Sizes:
        b = self._b
        return Sizes(*(b[r + 1] - b[r] for r in range(7)), b[FOOTER] - b[PROPERTIES])

    @property
    def bare_bytes(self) -> memoryview:
        """Properties through the end of the body, exactly as received [3.2]."""
        return memoryview(self.payload)[self._b[PROPERTIES] : self._b[FOOTER]]

    @property
    def body_bytes(self) -> memoryview:
        """The encoded body sections, as received."""
        return memoryview(self.payload)[self._b[BODY] : self._b[FOOTER]]

    def section_bytes(self, rank: int) -> memoryview:
        """The encoded sections of one rank (HEADER ... FOOTER), as received."""
        return memoryview(self.payload)[self._b[rank] : self._b[rank + 1]]

    def has(self, rank: int) -> bool:
        return self._b[rank] != self._b[rank + 1]

    @property
    def body_kind(self) -> int:
        """DATA, AMQP_SEQUENCE, AMQP_VALUE, or 0 for a message without body."""
        return self._bc

    # ------------------------------------------------------------ lazy sections

    def _section(self, rank: int) -> Any:
        start, end = self._b[rank], self._b[rank + 1]
        if start == end:
            return None
        value, pos = codec.decode(self.payload, start)
        if pos != end:  # cannot happen: decoding and skipping agree on sizes
            raise DecodeError(f"{_RANK_NAMES[rank]} section size mismatch")
        return value

    def _composite(self, rank: int, cls: type, constructors: tuple[frozenset[int], ...]) -> Any:
        start, end = self._b[rank], self._b[rank + 1]
        if start == end:
            return None
        try:
            value = _quick_composite(cls, constructors, self.payload, start, end)
        except (struct.error, IndexError, ValueError):
            value = None
        return self._section(rank) if value is None else value

    @property
    def header(self) -> Header | None:
        h = self._h
        if h is _UNSET:
            # Publishers repeat the same few headers: decode each one once.
            start, end = self._b[HEADER], self._b[HEADER + 1]
            raw = self.payload[start:end]
            h = _header_cache.get(raw) if start != end else None
            if h is None and start != end:
                h = self._composite(HEADER, Header, _HEADER_CONSTRUCTORS)
                if len(_header_cache) >= _HEADER_CACHE_MAX:
                    _header_cache.clear()
                _header_cache[raw] = h
            self._h = h
        return h

    @property
    def delivery_annotations(self) -> dict | None:
        v = self._da
        if v is _UNSET:
            self._da = v = self._section(DELIVERY_ANNOTATIONS)
        return v

    @property
    def message_annotations(self) -> dict | None:
        v = self._ma
        if v is _UNSET:
            self._ma = v = self._section(MESSAGE_ANNOTATIONS)
        return v

    @property
    def properties(self) -> Properties | None:
        v = self._p
        if v is _UNSET:
            self._p = v = self._composite(PROPERTIES, Properties, _PROPERTIES_CONSTRUCTORS)
        return v

    @property
    def application_properties(self) -> dict | None:
        v = self._ap
        if v is _UNSET:
            self._ap = v = self._section(APPLICATION_PROPERTIES)
        return v

    @property
    def footer(self) -> dict | None:
        v = self._ft
        if v is _UNSET:
            self._ft = v = self._section(FOOTER)
        return v

    @property
    def body_sections(self) -> tuple[Any, ...]:
        """The decoded body sections: Data, AmqpSequence or AmqpValue objects."""
        if self._body is not _UNSET:
            return self._body
        sections = []
        pos, end = self._b[BODY], self._b[FOOTER]
        while pos < end:
            section, pos = codec.decode(self.payload, pos)
            sections.append(section)
        if pos != end:
            raise DecodeError("body section size mismatch")
        self._body = body = tuple(sections)
        return body

    @property
    def body(self) -> Any:
        """The body as one value: the bytes of the data sections joined, the
        items of the amqp-sequence sections joined, the amqp-value's value,
        or None without a body."""
        sections = self.body_sections
        if self._bc == DATA:
            return sections[0] if len(sections) == 1 else b"".join(sections)
        if self._bc == AMQP_SEQUENCE:
            return [item for s in sections for item in s]
        if self._bc == AMQP_VALUE:
            return sections[0].value
        return None

    # ------------------------------------------------------------ fast fields
    # A missing header or properties section reads as one with every field
    # at its default [3.2.1], [3.2.4].

    durable = _header_field("durable", "whether the message is durable, False by default")
    priority = _header_field("priority", "0-255, 4 by default")
    ttl = _header_field("ttl", "milliseconds, or None")
    first_acquirer = _header_field("first_acquirer", "False by default")
    delivery_count = _header_field("delivery_count", "failed delivery attempts, 0 by default")

    message_id = _properties_field("message_id")
    user_id = _properties_field("user_id")
    to = _properties_field("to")
    subject = _properties_field("subject")
    reply_to = _properties_field("reply_to")
    correlation_id = _properties_field("correlation_id")
    content_type = _properties_field("content_type")
    absolute_expiry_time = _properties_field("absolute_expiry_time", "milliseconds since the Unix epoch, or None")
    creation_time = _properties_field("creation_time", "milliseconds since the Unix epoch, or None")
    group_id = _properties_field("group_id")

    # ------------------------------------------------------------ re-encoding

    def with_header(self, **changes: Any) -> Message:
        """This message with header fields changed; self if none changes."""
        header = _new_header(self, changes)
        if header is None:
            return self
        payload, bounds = splice(self.payload, self._b, header, None, True)
        return Message(payload, bounds, self._bc)

    def with_delivery_count(self, n: int) -> Message:
        return self.with_header(delivery_count=n)

    def with_first_acquirer(self, first: bool) -> Message:
        return self.with_header(first_acquirer=first)

    def with_message_annotations(self, merge: Mapping[Any, Any]) -> Message:
        """This message with `merge` added to its message annotations
        (str keys become symbols [3.2.3]); self if nothing changes."""
        annotations = _new_annotations(self, merge)
        if annotations is None:
            return self
        payload, bounds = splice(self.payload, self._b, None, annotations, True)
        return Message(payload, bounds, self._bc)

    def to_delivery_bytes(
        self,
        header_changes: Mapping[str, Any] | None = None,
        annotations_merge: Mapping[Any, Any] | None = None,
    ) -> bytes:
        """The payload to send to a consumer: the header with `header_changes`,
        the message annotations with `annotations_merge`, the bare message and
        footer unchanged, and no delivery annotations (they are meant for the
        next hop only [3.2.2]; RabbitMQ drops them too). Returns `payload`
        itself when nothing changes."""
        header = _new_header(self, header_changes)
        annotations = _new_annotations(self, annotations_merge)
        b = self._b
        if header is None and annotations is None and b[1] == b[2]:
            return self.payload
        return splice(self.payload, self._b, header, annotations, False)[0]

    def __repr__(self) -> str:
        b = self._b
        parts = [f"{_RANK_NAMES[r]}={b[r + 1] - b[r]}" for r in range(7) if b[r] != b[r + 1]]
        return f"<Message {len(self.payload)} bytes: {' '.join(parts) or 'empty'}>"


def _body_sections_for(body: Any, kind: str | None) -> list[Any]:
    if kind is None:
        kind = "data" if isinstance(body, (bytes, bytearray, memoryview)) else "value"
    if kind == "data":
        if isinstance(body, (list, tuple)):
            return [Data(bytes(b)) for b in body]
        return [Data(bytes(body))]
    if kind == "sequence":
        return [AmqpSequence(body)]
    if kind == "value":
        return [AmqpValue(body)]
    raise ValueError(f"body_kind is data, sequence or value, not {kind!r}")


def _new_header(message: Message, changes: Mapping[str, Any] | None) -> bytes | None:
    """The encoded header of `message` with `changes`, or None if nothing
    changes (the header is decoded only when there are changes)."""
    if not changes:
        return None
    unknown = changes.keys() - _HEADER_FIELDS
    if unknown:
        raise TypeError(f"not header fields: {', '.join(sorted(unknown))}")
    old = message.header
    base = _NO_HEADER if old is None else old
    if all(getattr(base, k) == v for k, v in changes.items()):
        return None
    new = Header(*(getattr(base, f.name) for f in Header.FIELDS))
    for k, v in changes.items():
        setattr(new, k, v)
    return new.encode()


def _new_annotations(message: Message, merge: Mapping[Any, Any] | None) -> bytes | None:
    """The encoded message-annotations of `message` with `merge` applied, or
    None if nothing changes (they are decoded only when there is a merge)."""
    if not merge:
        return None
    old = message.message_annotations or {}
    for k, v in merge.items():
        if k not in old or old[k] != v or type(old[k]) is not type(v):
            break
    else:
        return None
    new = dict(old)
    new.update(merge)
    return MessageAnnotations(new).encode()
