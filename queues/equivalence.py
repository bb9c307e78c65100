"""What makes a redeclaration inequivalent, named as RabbitMQ names it.

A queue or exchange declared again must match what exists; when it does not, the
error names the first field or argument that differs with both values
("inequivalent arg 'x-max-length' for queue 'q' in vhost '/': received 4 but
current is 3"), so a client's author can see which declaration disagrees.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

ABSENT = "none"  # RabbitMQ's word for an argument the declaration does not carry


def shown(value: Any) -> Any:
    """A value as the message shows it: booleans in lower case, an absent one as none."""
    if value is None:
        return ABSENT
    return str(value).lower() if isinstance(value, bool) else value


def first_difference(fields: Iterable[tuple[str, Any, Any]], current_arguments: Mapping[str, Any],
                     received_arguments: Mapping[str, Any]) -> tuple[str, Any, Any] | None:  # fmt: skip
    """(name, received, current) of the first field, then argument (by name), that differs; None if all agree.
    `fields` are (name, current, received). A bool and an int that compare equal still differ (True == 1)."""
    for name, current, received in fields:
        if current != received:
            return name, received, current
    for key in sorted(current_arguments.keys() | received_arguments.keys()):
        current, received = current_arguments.get(key), received_arguments.get(key)
        if current != received or isinstance(current, bool) != isinstance(received, bool):
            return key, received, current
    return None


def inequivalent(kind: str, name: str, vhost: str, difference: tuple[str, Any, Any]) -> str:
    field, received, current = difference
    return (f"inequivalent arg '{field}' for {kind} '{name}' in vhost '{vhost}': "
            f"received {shown(received)!r} but current is {shown(current)!r}")  # fmt: skip
