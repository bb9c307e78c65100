"""What routing may read of a message beyond its routing key, decoded only
when an exchange asks: a headers exchange its application-properties, a
consistent hash exchange a header or a property. Callers hand over the
mapping itself, a function returning it, or the message (anything with an
`application_properties` attribute and the properties' attributes), so a
publish to a direct, fanout or topic exchange never decodes them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

__all__ = ["MessageFacts", "RoutedMessage", "application_properties", "message_property"]


class RoutedMessage(Protocol):
    """The parts of a message (amqp/message.py's Message has them) routing reads."""

    @property
    def application_properties(self) -> Mapping[str, Any] | None: ...
    @property
    def message_id(self) -> Any: ...
    @property
    def correlation_id(self) -> Any: ...
    @property
    def creation_time(self) -> int | None: ...


MessageFacts = Mapping[str, Any] | Callable[[], Mapping[str, Any] | None] | RoutedMessage | None


def application_properties(message: MessageFacts) -> Mapping[str, Any] | None:
    """A message's application-properties from what routing is given: the
    mapping itself, a function returning it, or the message (anything with an
    `application_properties` attribute, decoded only when read)."""
    if message is None or type(message) is dict or isinstance(message, Mapping):
        return message  # type: ignore[return-value]
    if callable(message):
        return message()
    return message.application_properties


def message_property(message: MessageFacts, name: str) -> Any:
    """message_id, correlation_id, or timestamp (the creation time in whole
    seconds, as the plugin hashes it); None when routing was given no message."""
    if name == "timestamp":
        millis = getattr(message, "creation_time", None)
        return None if millis is None else int(millis) // 1000
    return getattr(message, name, None)
