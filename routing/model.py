"""The records the routing table holds: exchanges, bindings, destinations.

They are frozen so that a caller (management, the metadata store) can keep
one without the table changing it behind its back; `arguments` is copied into
a read-only mapping for the same reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, NamedTuple

DEFAULT_EXCHANGE = ""
ALTERNATE_EXCHANGE = "alternate-exchange"


class ExchangeType(StrEnum):
    DIRECT = "direct"
    FANOUT = "fanout"
    TOPIC = "topic"
    HEADERS = "headers"
    LOCAL_RANDOM = "x-local-random"
    CONSISTENT_HASH = "x-consistent-hash"
    DELAYED_MESSAGE = "x-delayed-message"


class DestinationKind(StrEnum):
    QUEUE = "queue"
    EXCHANGE = "exchange"


class Destination(NamedTuple):
    """Where a binding leads; a tuple so that indexes hash it cheaply."""

    kind: DestinationKind
    name: str


def _frozen(arguments: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(arguments or {}))


@dataclass(frozen=True, slots=True)
class Exchange:
    name: str
    type: ExchangeType
    durable: bool = True
    auto_delete: bool = False
    internal: bool = False
    # hash=False: AMQP argument values may be unhashable (lists, maps).
    arguments: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", ExchangeType(self.type))
        object.__setattr__(self, "arguments", _frozen(self.arguments))

    @property
    def alternate_exchange(self) -> str | None:
        value = self.arguments.get(ALTERNATE_EXCHANGE)
        return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class Binding:
    """A binding is identified by all five fields, as in RabbitMQ: the same
    source, destination and key with other arguments is another binding."""

    source: str
    destination_kind: DestinationKind
    destination: str
    binding_key: str = ""
    arguments: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "destination_kind", DestinationKind(self.destination_kind))
        object.__setattr__(self, "arguments", _frozen(self.arguments))

    @property
    def target(self) -> Destination:
        return Destination(self.destination_kind, self.destination)
