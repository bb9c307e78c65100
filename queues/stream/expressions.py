"""AMQP Filter Expressions 1.0 (OASIS): the properties filter (§4.2.4) and
the application-properties filter (§4.2.5), evaluated per message.

Each is a map; a message passes when every entry matches (an absent field
never does). A string value "&p:xyz" matches strings starting with xyz,
"&s:xyz" strings ending with it, and "&&..." the literal "&..."; anything
else compares for equality, numbers across integer types. Matching is a
constant number of string operations per entry: no patterns, no
backtracking. The SQL filter (amqp:sql-filter) is queues/stream/sql/.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from amqp.message import Message
from queues.base import QueueArgumentError

__all__ = ["APPLICATION_PROPERTIES_FILTER", "PROPERTIES_FILTER", "MessageFilter"]

PROPERTIES_FILTER = "amqp:properties-filter"
APPLICATION_PROPERTIES_FILTER = "amqp:application-properties-filter"
MAX_ENTRIES = 64
PROPERTY_FIELDS = {
    "message-id": "message_id", "user-id": "user_id", "to": "to", "subject": "subject", "reply-to": "reply_to",
    "correlation-id": "correlation_id", "content-type": "content_type", "content-encoding": "content_encoding",
    "absolute-expiry-time": "absolute_expiry_time", "creation-time": "creation_time", "group-id": "group_id",
    "group-sequence": "group_sequence", "reply-to-group-id": "reply_to_group_id",
}  # fmt: skip


def _matcher(expected: Any) -> Any:
    """A predicate for one entry's value."""
    if isinstance(expected, str):
        if expected.startswith("&p:"):
            prefix = expected[3:]
            return lambda v: isinstance(v, str) and v.startswith(prefix)
        if expected.startswith("&s:"):
            suffix = expected[3:]
            return lambda v: isinstance(v, str) and v.endswith(suffix)
        if expected.startswith("&&"):
            expected = expected[1:]
        return lambda v: isinstance(v, str) and v == expected
    if isinstance(expected, bool):
        return lambda v: isinstance(v, bool) and v == expected
    if isinstance(expected, (int, float)):
        return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v == expected
    return lambda v: v == expected


def _entries(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not value or len(value) > MAX_ENTRIES:
        raise QueueArgumentError(f"invalid {what}: a map of 1 to {MAX_ENTRIES} entries")
    return {str(k): _matcher(v) for k, v in value.items()}


@dataclass(frozen=True, slots=True)
class MessageFilter:
    properties: dict[str, Any] | None = None  # field attribute -> predicate
    application_properties: dict[str, Any] | None = None

    @classmethod
    def parse(cls, name: str, value: Any, current: MessageFilter | None) -> MessageFilter:
        current = current or cls()
        if name == PROPERTIES_FILTER:
            entries = _entries(value, PROPERTIES_FILTER)
            unknown = [k for k in entries if k not in PROPERTY_FIELDS]
            if unknown:
                raise QueueArgumentError(f"invalid {PROPERTIES_FILTER}: no property {unknown[0]!r}")
            return cls({PROPERTY_FIELDS[k]: m for k, m in entries.items()}, current.application_properties)
        return cls(current.properties, _entries(value, APPLICATION_PROPERTIES_FILTER))

    def matches(self, message: Message) -> bool:
        if self.properties:
            props = message.properties
            if props is None:
                return False
            for field, matches in self.properties.items():
                value = getattr(props, field)
                if value is None or not matches(value):
                    return False
        if self.application_properties:
            app = message.application_properties or {}
            for key, matches in self.application_properties.items():
                if key not in app or not matches(app[key]):
                    return False
        return True
