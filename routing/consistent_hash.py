"""The x-consistent-hash exchange (RabbitMQ's consistent hash exchange plugin).

Each bound destination owns as many buckets as its binding key says (its
weight, 1 to 10,000). A message goes to the destination of one bucket, picked
by jump consistent hash (Lamping and Veach) of a value of the message: its
routing key, or the header named by the exchange argument `hash-header`, or
the property named by `hash-property` (message_id, correlation_id or
timestamp in seconds). Jump hashing moves only the keys of the buckets that
come or go when a binding changes.

What Warren does beyond the plugin: the buckets are laid out in the order of
the destinations' names, not in the order the bindings arrived, and the value
is hashed with BLAKE2b rather than the runtime's own term hash, so the same
message reaches the same queue on every node and after any restart, whatever
order the metadata was replayed in. A destination bound more than once gets
the weight of its heaviest binding (the plugin keeps its first).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from typing import Any

from routing.errors import PreconditionFailed
from routing.message_facts import application_properties, message_property
from routing.model import Binding, Destination

__all__ = ["ConsistentHashIndex", "check_arguments", "jump_hash", "stable_hash"]

HASH_HEADER = "hash-header"
HASH_PROPERTY = "hash-property"
PROPERTIES = ("message_id", "correlation_id", "timestamp")
MAX_WEIGHT = 10_000

_NOTHING: tuple[Destination, ...] = ()


def check_arguments(arguments: Mapping[str, Any]) -> None:
    """The exchange's own arguments, refused as the plugin refuses them."""
    header, prop = arguments.get(HASH_HEADER), arguments.get(HASH_PROPERTY)
    if header is not None and prop is not None:
        raise PreconditionFailed("hash-header and hash-property are mutually exclusive")
    if header is not None and not isinstance(header, str):
        raise PreconditionFailed(f"{HASH_HEADER} must be a string, got {header!r:.100}")
    if prop is not None and prop not in PROPERTIES:
        raise PreconditionFailed(f"Unsupported property: {prop!r:.100} (hash-property takes {', '.join(PROPERTIES)})")


def weight_of(binding: Binding) -> int:
    key = binding.binding_key
    try:
        weight = int(key)
    except ValueError:
        raise PreconditionFailed(f"The binding key must be an integer: {key!r:.100}") from None
    if weight < 1:
        raise PreconditionFailed("The binding key must be greater than 0")
    if weight > MAX_WEIGHT:
        raise PreconditionFailed(f"The binding key must not exceed {MAX_WEIGHT}")
    return weight


def stable_hash(value: Any) -> int:
    """64 bits of a value, the same in every process (Python's own str hash is
    salted per process). Strings and bytes hash by content, numbers by their
    decimal form; a missing value hashes as the empty one."""
    if value is None:
        data = b""
    elif isinstance(value, bytes):
        data = value
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
    else:
        data = str(value).encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def jump_hash(key: int, buckets: int) -> int:
    """Lamping and Veach's jump consistent hash: a bucket in [0, buckets)."""
    b, j = -1, 0
    while j < buckets:
        b = j
        key = (key * 2862933555777941757 + 1) & 0xFFFFFFFFFFFFFFFF
        j = int((b + 1) * (float(1 << 31) / float((key >> 33) + 1)))
    return b


class ConsistentHashIndex:
    __slots__ = ("_header", "_property", "_weights", "_buckets")

    def __init__(self, arguments: Mapping[str, Any]) -> None:
        check_arguments(arguments)
        self._header: str | None = arguments.get(HASH_HEADER)
        self._property: str | None = arguments.get(HASH_PROPERTY)
        self._weights: dict[Destination, dict[str, int]] = {}  # destination -> binding key -> count
        self._buckets: tuple[Destination, ...] = ()

    def validate(self, binding: Binding) -> None:
        weight_of(binding)

    def add(self, binding: Binding) -> None:
        keys = self._weights.setdefault(binding.target, {})
        keys[binding.binding_key] = keys.get(binding.binding_key, 0) + 1
        self._layout()

    def remove(self, binding: Binding) -> None:
        keys = self._weights[binding.target]
        if keys[binding.binding_key] == 1:
            del keys[binding.binding_key]
            if not keys:
                del self._weights[binding.target]
        else:
            keys[binding.binding_key] -= 1
        self._layout()

    def _layout(self) -> None:
        buckets: list[Destination] = []
        for dest in sorted(self._weights):
            buckets.extend([dest] * max(int(key) for key in self._weights[dest]))
        self._buckets = tuple(buckets)

    def match(self, routing_key: str, headers: Any) -> Collection[Destination]:
        buckets = self._buckets
        if not buckets:
            return _NOTHING
        if self._header is not None:
            value = (application_properties(headers) or {}).get(self._header)
        elif self._property is not None:
            value = message_property(headers, self._property)
        else:
            value = routing_key
        return (buckets[jump_hash(stable_hash(value), len(buckets))],)
